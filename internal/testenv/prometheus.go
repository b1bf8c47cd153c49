package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Prometheus extracts, once, the prometheus and promtool binaries from
// Debian's package (apt-get download and dpkg-deb -x: no service is
// installed or started) and returns prometheus's path; promtool is beside
// it. It is cached under CacheDir() by the package's
// version (a file lock serializes extractions between test binaries). A
// failure is an error, never a reason to skip.
func Prometheus() (string, error) {
	cache := CacheDir()
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(cache, ".prometheus.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	// promtool is the later of the two to be kept: its presence means both.
	if tools, _ := filepath.Glob(filepath.Join(cache, "prometheus-*", "promtool")); len(tools) > 0 {
		return filepath.Join(filepath.Dir(tools[0]), "prometheus"), nil
	}
	tmp, err := os.MkdirTemp(cache, ".prometheus-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	deb, err := aptDownload(tmp, "prometheus")
	if err != nil {
		return "", err
	}
	root := filepath.Join(tmp, "root")
	if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
		return "", fmt.Errorf("dpkg-deb -x %s: %w\n%s", deb, err, out)
	}
	// prometheus_2.42.0+ds-5+deb12u1_amd64.deb: the version names the cache.
	version := strings.Split(filepath.Base(deb), "_")[1]
	dir := filepath.Join(cache, "prometheus-"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range []string{"prometheus", "promtool"} {
		if err := os.Rename(filepath.Join(root, "usr", "bin", name), filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("the prometheus package has no usr/bin/%s: %w", name, err)
		}
	}
	return filepath.Join(dir, "prometheus"), nil
}

// aptDownload fetches package pkg's .deb from Debian's archive into dir,
// refreshing the package lists once if they do not know it.
func aptDownload(dir, pkg string) (string, error) {
	download := func() ([]byte, error) {
		cmd := exec.Command("apt-get", "download", "-qq", pkg)
		cmd.Dir = dir
		return cmd.CombinedOutput()
	}
	out, err := download()
	if err != nil {
		if uout, uerr := exec.Command("apt-get", "update", "-qq").CombinedOutput(); uerr != nil {
			return "", fmt.Errorf("apt-get download %s: %w\n%s\napt-get update: %v\n%s", pkg, err, out, uerr, uout)
		}
		if out, err = download(); err != nil {
			return "", fmt.Errorf("apt-get download %s (after apt-get update): %w\n%s", pkg, err, out)
		}
	}
	debs, _ := filepath.Glob(filepath.Join(dir, pkg+"_*.deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download %s left %d packages in %s", pkg, len(debs), dir)
	}
	return debs[0], nil
}
