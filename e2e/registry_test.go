//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/crypto/bcrypt"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// registryTimeout is the test daemon's --registry-timeout: short, so the
// hanging registries end the pull quickly.
const registryTimeout = 3 * time.Second

// testCA is a CA made for one test, and a server certificate it signed
// for 127.0.0.1. boxd trusts it through --registry-ca only; the host's
// trust store is never touched.
type testCA struct {
	caFile   string
	cert     tls.Certificate
	certFile string
	keyFile  string
}

func newTestCA(t *testing.T, dir string) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "boxd e2e test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ca := testCA{caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem")}
	write := func(p, typ string, b []byte) {
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(ca.caFile, "CERTIFICATE", caDER)
	write(ca.certFile, "CERTIFICATE", der)
	write(ca.keyFile, "EC PRIVATE KEY", keyDER)
	if ca.cert, err = tls.LoadX509KeyPair(ca.certFile, ca.keyFile); err != nil {
		t.Fatal(err)
	}
	return ca
}

const (
	registryUser     = "tester"
	registryPassword = "s3cret-for-e2e"
)

// startRegistry runs Debian's docker-registry on a free loopback port with
// TLS from ca and htpasswd basic auth, and returns HOST:PORT.
func startRegistry(t *testing.T, dir string, ca testCA) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Fatalf("docker-registry (Debian package docker-registry, installed by scripts/setup.sh) is missing: %v", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(registryPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(registryUser+":"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
auth:
  htpasswd:
    realm: boxd-e2e
    path: %s
`, filepath.Join(dir, "data"), addr, ca.certFile, ca.keyFile, htpasswd)
	cfgFile := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfgFile)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			t.Logf("registry log:\n%s", tail(filepath.Join(dir, "registry.log")))
		}
	})
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(ca.caFile)
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := hc.Get("https://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry did not answer on %s: %v\n%s", addr, err, tail(filepath.Join(dir, "registry.log")))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// boxctlEnv runs boxctl against socket with extra environment and stdin.
func boxctlEnv(socket string, extraEnv []string, stdin string, args ...string) (string, string, int) {
	cmd := exec.Command(env.boxctl, append([]string{"--socket", socket}, args...)...)
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return stdout.String(), stderr.String(), code
}

// pullAPI pulls through the API and returns the image or the error.
func pullAPI(c context.Context, api boxdv1connect.RegistryServiceClient, req *boxdv1.PullImageRequest) (*boxdv1.Image, []*boxdv1.TransferProgress, error) {
	stream, err := api.PullImage(c, connect.NewRequest(req))
	if err != nil {
		return nil, nil, err
	}
	defer stream.Close()
	var progress []*boxdv1.TransferProgress
	for stream.Receive() {
		switch m := stream.Msg().Msg.(type) {
		case *boxdv1.PullImageResponse_Progress:
			progress = append(progress, m.Progress)
		case *boxdv1.PullImageResponse_Image:
			return m.Image, progress, nil
		}
	}
	if err := stream.Err(); err != nil {
		return nil, progress, err
	}
	return nil, progress, fmt.Errorf("stream ended without the image")
}

// pullStoreState is what a failed pull must leave as it was: blobs, partial
// downloads, snapshots, leases and image names of the daemon's namespace.
type pullStoreState struct {
	blobs, ingests, snapshots, leases, images []string
}

func readStoreState(t *testing.T, c context.Context) pullStoreState {
	t.Helper()
	var s pullStoreState
	cs := env.ctr.ContentStore()
	if err := cs.Walk(c, func(i content.Info) error { s.blobs = append(s.blobs, i.Digest.String()); return nil }); err != nil {
		t.Fatal(err)
	}
	sts, err := cs.ListStatuses(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		s.ingests = append(s.ingests, st.Ref)
	}
	if err := env.ctr.SnapshotService("overlayfs").Walk(c, func(_ context.Context, i snapshots.Info) error {
		s.snapshots = append(s.snapshots, i.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ls, err := env.ctr.LeasesService().List(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		s.leases = append(s.leases, l.ID)
	}
	ims, err := env.ctr.ImageService().List(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range ims {
		s.images = append(s.images, im.Name+"@"+im.Target.Digest.String())
	}
	for _, l := range [][]string{s.blobs, s.ingests, s.snapshots, s.leases, s.images} {
		slices.Sort(l)
	}
	return s
}

// wantNothingLeft checks that a failed call left nothing in the store:
// no blob, partial download, snapshot or lease that was not there before,
// and the images exactly as they were. Blobs and snapshots may go in the
// meantime: containerd's garbage collector catches up on what an earlier
// step (a forced import over a name) let go, on its own schedule.
func wantNothingLeft(t *testing.T, what string, c context.Context, before pullStoreState) {
	t.Helper()
	after := readStoreState(t, c)
	for _, p := range []struct {
		name string
		b, a []string
	}{{"blobs", before.blobs, after.blobs}, {"partial downloads", before.ingests, after.ingests},
		{"snapshots", before.snapshots, after.snapshots}, {"leases", before.leases, after.leases}} {
		var added []string
		for _, x := range p.a {
			if !slices.Contains(p.b, x) {
				added = append(added, x)
			}
		}
		if len(added) > 0 {
			t.Errorf("%s left %s behind: %v (before %v)", what, p.name, added, p.b)
		}
	}
	if !slices.Equal(before.images, after.images) {
		t.Errorf("%s changed the images: before %v, after %v", what, before.images, after.images)
	}
}

// TestRegistry: a real registry (Debian's docker-registry) on loopback with
// TLS from a CA made here and basic auth: push an imported image, remove
// it, pull it back with the same digest and run it; then every bad input
// (malformed references, wrong credentials, unknown repositories and
// tags, a registry that answers 500, hangs, speaks plain HTTP or shows an
// untrusted certificate, a layer that escapes the root or expands past
// the size limit) fails naming what was wrong and leaves nothing.
func TestRegistry(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	host := startRegistry(t, filepath.Join(dir, "registry"), ca)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) }))
	t.Cleanup(plain.Close)
	// A plain-HTTP registry boxd is told to trust (--insecure-registry).
	hello := fakeImage(t, layerTar(t, tar.Header{Name: "hello", Typeflag: tar.TypeReg, Mode: 0o644, Size: 5}))
	insecure := httptest.NewServer(fakeHandler(nil, hello))
	t.Cleanup(insecure.Close)
	insecureHost := strings.TrimPrefix(insecure.URL, "http://")
	d := startBoxd(t, namespace+"-registry", true, "--registry-ca", ca.caFile, "--registry-timeout", registryTimeout.String(),
		"--max-image-size", "64m", "--insecure-registry", insecureHost)
	reg := rpcclient.NewRegistry(d.sock)
	c := d.c

	ref := host + "/e2e/busybox:v1"
	out, stderr, code := d.boxctl("image", "import", "--rootfs", env.busybox, "--name", ref)
	if code != 0 {
		t.Fatalf("import: %s", stderr)
	}
	digest := strings.Fields(out)[1]
	login := []string{"--username", registryUser, "--password-stdin"}

	t.Run("PushPullRun", func(t *testing.T) {
		// Anonymous and wrong-password pushes are refused by name.
		_, stderr, code := d.boxctl("image", "push", ref)
		if code == 0 || !strings.Contains(stderr, "unauthenticated") || !strings.Contains(stderr, host) {
			t.Errorf("anonymous push: exit %d, %s; want unauthenticated naming %s", code, stderr, host)
		}
		_, stderr, code = boxctlEnv(d.sock, nil, "wrong\n", append([]string{"image", "push"}, append(login, ref)...)...)
		if code == 0 || !strings.Contains(stderr, "unauthenticated") {
			t.Errorf("push with a wrong password: exit %d, %s", code, stderr)
		}
		out, stderr, code := boxctlEnv(d.sock, nil, registryPassword+"\n", append([]string{"image", "push"}, append(login, ref)...)...)
		if code != 0 || out != ref+"\t"+digest+"\n" {
			t.Fatalf("push: exit %d, stdout %q, stderr %s; want %q", code, out, stderr, ref+"\t"+digest)
		}
		// Push under a second name with --from.
		other := host + "/e2e/copy:v2"
		if out, stderr, code := boxctlEnv(d.sock, nil, registryPassword, append([]string{"image", "push", "--from", ref}, append(login, other)...)...); code != 0 || !strings.Contains(out, digest) {
			t.Fatalf("push --from: exit %d, %q %s", code, out, stderr)
		}
		if _, stderr, code := d.boxctl("image", "rm", ref); code != 0 {
			t.Fatalf("rm: %s", stderr)
		}

		// Credentials from a docker config, as the calling user's.
		cfgDir := filepath.Join(dir, "docker")
		_ = os.MkdirAll(cfgDir, 0o700)
		auth := base64.StdEncoding.EncodeToString([]byte(registryUser + ":" + registryPassword))
		if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(`{"auths":{"https://`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		dockerEnv := []string{"DOCKER_CONFIG=" + cfgDir}
		out, stderr, code = boxctlEnv(d.sock, dockerEnv, "", "image", "pull", ref)
		if code != 0 || out != ref+"\t"+digest+"\n" {
			t.Fatalf("pull: exit %d, stdout %q, stderr %s; want the pushed digest %s", code, out, stderr, digest)
		}
		if stderr != "" {
			t.Errorf("pull not on a terminal printed progress: %q", stderr)
		}
		im := findImage(t, d, ref)
		if im.Labels["boxd.io/pulled-from"] != ref+"@"+digest || !strings.HasPrefix(im.Labels["boxd.io/imported-by"], "uid=0 ") {
			t.Errorf("pulled image labels %v", im.Labels)
		}
		// On a terminal (script gives boxctl one), progress per blob.
		if _, stderr, code := d.boxctl("image", "rm", ref); code != 0 {
			t.Fatalf("rm: %s", stderr)
		}
		tty := exec.Command("script", "-qec", env.boxctl+" --socket "+d.sock+" image pull "+ref, "/dev/null")
		tty.Env = append(os.Environ(), dockerEnv...)
		ttyOut, err := tty.CombinedOutput()
		for _, want := range []string{"manifest", "config", "layer", "done", "\x1b[", ref + "\t" + digest} {
			if err != nil || !strings.Contains(string(ttyOut), want) {
				t.Errorf("pull on a terminal: %v, output %q lacks %q", err, ttyOut, want)
			}
		}
		// The same digest again is a no-op.
		got, progress, err := pullAPI(c, reg, &boxdv1.PullImageRequest{Reference: ref, Auth: &boxdv1.RegistryAuth{Username: registryUser, Password: registryPassword}})
		if err != nil || got.Digest != digest || progress[len(progress)-1].Phase != "up to date" {
			t.Errorf("second pull: %v %v", got, err)
		}

		// Run it: unpacked for the sandbox's ID-mapped user namespace, root
		// inside owns its files, and root maps to the host range.
		id := createOnDaemon(t, d, ref)
		o := execOut(t, d, id, "stat -c %u:%g /bin/busybox; id -u; cat /proc/self/uid_map")
		if f := strings.Fields(o); len(f) < 5 || f[0] != "0:0" || f[1] != "0" || f[2] != "0" || f[3] == "0" {
			t.Errorf("in the pulled image: %q; want /bin/busybox owned by 0:0, uid 0, root mapped to a host range", o)
		}

		// create --pull missing fetches a missing image; --pull never
		// (the default) does not.
		if _, stderr, code := boxctlEnv(d.sock, dockerEnv, "", "create", "--image", other); code == 0 || !strings.Contains(stderr, "not_found") {
			t.Errorf("create of a missing image without --pull: exit %d %s", code, stderr)
		}
		out, stderr, code = boxctlEnv(d.sock, dockerEnv, "", "create", "--image", other, "--pull", "missing")
		if code != 0 {
			t.Fatalf("create --pull missing: %s", stderr)
		}
		sid := strings.TrimSpace(out)
		t.Cleanup(func() { d.boxctl("rm", "-f", sid) })
		if im := findImage(t, d, other); im.Digest != digest {
			t.Errorf("create --pull missing stored %s, want %s", im.Digest, digest)
		}
		if _, stderr, code := d.boxctl("create", "--image", other, "--pull", "sometimes"); code == 0 || !strings.Contains(stderr, "pull") {
			t.Errorf("--pull sometimes: exit %d %s", code, stderr)
		}

		// An import over a pulled name drops the pull's origin label.
		if _, stderr, code := d.boxctl("image", "import", "--force", "--rootfs", rootfsWithMarker(t, "local"), "--name", ref); code != 0 {
			t.Fatalf("import --force: %s", stderr)
		}
		if l := findImage(t, d, ref).Labels; l["boxd.io/pulled-from"] != "" || l["boxd.io/replaced-digest"] != digest {
			t.Errorf("labels after an import over a pulled image: %v", l)
		}
	})

	goodAuth := &boxdv1.RegistryAuth{Username: registryUser, Password: registryPassword}
	bad := func(t *testing.T, what string, req *boxdv1.PullImageRequest, code connect.Code, words ...string) {
		t.Helper()
		before := readStoreState(t, c)
		start := time.Now()
		im, _, err := pullAPI(c, reg, req)
		if err == nil {
			t.Errorf("%s: pulled %v, want an error", what, im)
			return
		}
		wantCodeAll(t, what, err, code, words...)
		if el := time.Since(start); el > registryTimeout+10*time.Second {
			t.Errorf("%s took %v", what, el)
		}
		wantNothingLeft(t, what, c, before)
	}

	t.Run("InsecureRegistry", func(t *testing.T) {
		// Three at once: each gets the image.
		type result struct {
			im  *boxdv1.Image
			err error
		}
		results := make(chan result, 3)
		for range 3 {
			go func() {
				got, _, err := pullAPI(c, reg, &boxdv1.PullImageRequest{Reference: insecureHost + "/e2e/x:v1"})
				if err == nil && got.Digest != hello.mDigest.String() {
					err = fmt.Errorf("pulled %s, want %s", got.Digest, hello.mDigest)
				}
				results <- result{got, err}
			}()
		}
		var im *boxdv1.Image
		for range 3 {
			r := <-results
			if r.err != nil {
				t.Fatalf("pull from the registry named insecure: %v", r.err)
			}
			im = r.im
		}
		if _, stderr, code := d.boxctl("image", "rm", im.Name); code != 0 {
			t.Errorf("rm: %s", stderr)
		}
	})

	t.Run("BadReferences", func(t *testing.T) {
		bad(t, "no host", &boxdv1.PullImageRequest{Reference: "busybox"}, connect.CodeInvalidArgument, "no registry host")
		bad(t, "path only", &boxdv1.PullImageRequest{Reference: "team/app:v1"}, connect.CodeInvalidArgument, "no registry host")
		bad(t, "uppercase", &boxdv1.PullImageRequest{Reference: host + "/E2E/Busybox"}, connect.CodeInvalidArgument, "malformed")
		bad(t, "bad tag", &boxdv1.PullImageRequest{Reference: host + "/e2e/busybox:a:b"}, connect.CodeInvalidArgument, "malformed")
		bad(t, "foreign platform", &boxdv1.PullImageRequest{Reference: ref, Platform: "linux/s390x"}, connect.CodeInvalidArgument, "cannot run on this host")
		_, stderr, code := d.boxctl("image", "pull", "nohost")
		if code == 0 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, "no registry host") {
			t.Errorf("boxctl image pull nohost: exit %d, %s", code, stderr)
		}
	})

	t.Run("RealRegistryRefusals", func(t *testing.T) {
		bad(t, "wrong password", &boxdv1.PullImageRequest{Reference: ref, Auth: &boxdv1.RegistryAuth{Username: registryUser, Password: "nope"}},
			connect.CodeUnauthenticated, host, "credentials")
		bad(t, "no credentials", &boxdv1.PullImageRequest{Reference: host + "/e2e/busybox:v9"}, connect.CodeUnauthenticated, host)
		bad(t, "unknown repository", &boxdv1.PullImageRequest{Reference: host + "/e2e/nothing:v1", Auth: goodAuth}, connect.CodeNotFound, host, "e2e/nothing")
		bad(t, "unknown tag", &boxdv1.PullImageRequest{Reference: host + "/e2e/busybox:v9", Auth: goodAuth}, connect.CodeNotFound, "e2e/busybox:v9")
		bad(t, "plain HTTP", &boxdv1.PullImageRequest{Reference: strings.TrimPrefix(plain.URL, "http://") + "/e2e/x:v1"}, connect.CodeFailedPrecondition, "plain HTTP", "--insecure-registry")
	})

	t.Run("BrokenRegistries", func(t *testing.T) {
		untrusted := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // boxd's refused handshake is expected
		untrusted.StartTLS()
		defer untrusted.Close()
		bad(t, "untrusted certificate", &boxdv1.PullImageRequest{Reference: strings.TrimPrefix(untrusted.URL, "https://") + "/e2e/x:v1"},
			connect.CodeFailedPrecondition, "not trusted", "--registry-ca")

		failing := fakeRegistry(t, ca, func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(http.StatusInternalServerError)
			return true
		})
		bad(t, "500", &boxdv1.PullImageRequest{Reference: failing + "/e2e/x:v1"}, connect.CodeUnavailable, failing, "500")

		hang := make(chan struct{})
		defer close(hang)
		hanging := fakeRegistry(t, ca, func(w http.ResponseWriter, r *http.Request) bool {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return true
		})
		bad(t, "hanging registry", &boxdv1.PullImageRequest{Reference: hanging + "/e2e/x:v1"}, connect.CodeDeadlineExceeded, hanging, "--registry-timeout")

		// A registry that stops in the middle of a layer: the partial
		// download goes too.
		img := fakeImage(t, layerTar(t, tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4 << 20}))
		midway := fakeRegistry(t, ca, func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/v2/e2e/x/blobs/"+img.layer.String() {
				return false
			}
			w.Header().Set("Content-Length", fmt.Sprint(len(img.blobs[img.layer])))
			_, _ = w.Write(img.blobs[img.layer][:len(img.blobs[img.layer])/2])
			w.(http.Flusher).Flush()
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return true
		}, img)
		bad(t, "registry hanging mid-layer", &boxdv1.PullImageRequest{Reference: midway + "/e2e/x:v1"}, connect.CodeDeadlineExceeded, midway, "--registry-timeout")
	})

	t.Run("HostileLayers", func(t *testing.T) {
		escape := fakeImage(t, layerTar(t, tar.Header{Name: "ok", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3},
			tar.Header{Name: "../../escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}))
		h := fakeRegistry(t, ca, nil, escape)
		bad(t, "path-escaping layer", &boxdv1.PullImageRequest{Reference: h + "/e2e/x:v1"}, connect.CodeInvalidArgument, escape.layer.String(), `"../../escaped" leaves`)

		link := fakeImage(t, layerTar(t, tar.Header{Name: "shadow", Typeflag: tar.TypeLink, Linkname: "../../../etc/shadow"}))
		h = fakeRegistry(t, ca, nil, link)
		bad(t, "hard link out", &boxdv1.PullImageRequest{Reference: h + "/e2e/x:v1"}, connect.CodeInvalidArgument, "hard link", "../../../etc/shadow")

		// 100 MiB of zeros, about 100 KiB compressed, against
		// --max-image-size 64m.
		bomb := fakeImage(t, layerTar(t, tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: 100 << 20}))
		h = fakeRegistry(t, ca, nil, bomb)
		bad(t, "decompression bomb", &boxdv1.PullImageRequest{Reference: h + "/e2e/x:v1"}, connect.CodeResourceExhausted, bomb.layer.String(), "--max-image-size")
		if _, err := os.Stat(filepath.Join(dir, "escaped")); err == nil {
			t.Errorf("the escaping entry was written")
		}
	})
}

func findImage(t *testing.T, d *daemon, name string) *boxdv1.Image {
	t.Helper()
	resp, err := rpcclient.New(d.sock).ListImages(d.c, connect.NewRequest(&boxdv1.ListImagesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range resp.Msg.Images {
		if im.Name == name {
			return im
		}
	}
	t.Fatalf("image %s not listed", name)
	return nil
}

func createOnDaemon(t *testing.T, d *daemon, image string) string {
	t.Helper()
	resp, err := d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Image: image}))
	if err != nil {
		t.Fatalf("create on %s: %v", image, err)
	}
	id := resp.Msg.Sandbox.Id
	t.Cleanup(func() { _, _ = d.api.DeleteSandbox(d.c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id})) })
	return id
}

func execOut(t *testing.T, d *daemon, id, script string) string {
	t.Helper()
	resp, err := d.api.Exec(d.c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", script}}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.Result.ExitCode != 0 {
		t.Fatalf("%q: exit %d: %s", script, resp.Msg.Result.ExitCode, resp.Msg.Stderr)
	}
	return string(resp.Msg.Stdout)
}

// layerTar is a gzipped tar of entries with zero-filled bodies.
func layerTar(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	zeros := make([]byte, 1<<20)
	for _, h := range entries {
		h := h
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		for left := h.Size; left > 0; {
			n := min(left, int64(len(zeros)))
			if _, err := tw.Write(zeros[:n]); err != nil {
				t.Fatal(err)
			}
			left -= n
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fakeImg is an image a fake registry serves as e2e/x:v1.
type fakeImg struct {
	manifest []byte
	mDigest  digest.Digest
	layer    digest.Digest
	blobs    map[digest.Digest][]byte
}

func fakeImage(t *testing.T, layer []byte) fakeImg {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	diffID, err := digest.FromReader(zr)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(ocispec.Image{
		Platform: ocispec.Platform{OS: "linux", Architecture: goruntime.GOARCH},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
	})
	img := fakeImg{blobs: map[digest.Digest][]byte{}, layer: digest.FromBytes(layer)}
	img.blobs[img.layer] = layer
	img.blobs[digest.FromBytes(cfg)] = cfg
	img.manifest, _ = json.Marshal(ocispec.Manifest{
		Versioned: ocispecs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(cfg), Size: int64(len(cfg))},
		Layers:    []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: img.layer, Size: int64(len(layer))}},
	})
	img.mDigest = digest.FromBytes(img.manifest)
	return img
}

// fakeRegistry is a small registry on loopback with a certificate from ca
// that serves imgs (as e2e/x:v1) anonymously; intercept, if set, answers
// a request first when it returns true. It returns HOST:PORT.
func fakeRegistry(t *testing.T, ca testCA, intercept func(http.ResponseWriter, *http.Request) bool, imgs ...fakeImg) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(fakeHandler(intercept, imgs...))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// fakeHandler serves imgs as e2e/x:v1 (see fakeRegistry).
func fakeHandler(intercept func(http.ResponseWriter, *http.Request) bool, imgs ...fakeImg) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if intercept != nil && intercept(w, r) {
			return
		}
		if r.URL.Path == "/v2/" {
			return
		}
		for _, img := range imgs {
			if strings.HasPrefix(r.URL.Path, "/v2/e2e/x/manifests/") {
				w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
				w.Header().Set("Docker-Content-Digest", img.mDigest.String())
				w.Header().Set("Content-Length", fmt.Sprint(len(img.manifest)))
				_, _ = w.Write(img.manifest)
				return
			}
			if b, ok := img.blobs[digest.Digest(strings.TrimPrefix(r.URL.Path, "/v2/e2e/x/blobs/"))]; ok {
				w.Header().Set("Content-Length", fmt.Sprint(len(b)))
				_, _ = w.Write(b)
				return
			}
		}
		http.NotFound(w, r)
	})
}
