//go:build linux

package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Kube is a Kubernetes control plane started for a test: etcd and
// kube-apiserver on loopback, with private directories and certificates,
// and no kubelet (nothing runs pods; controllers and clients see a real
// API server). Build its binaries with KubeBinaries.
type Kube struct {
	Dir        string // private directory: certificates, data, logs
	Bin        string // kube-apiserver, kubectl and etcd
	Kubeconfig string // an admin (system:masters) kubeconfig
	Server     string // https://127.0.0.1:PORT
	etcd, api  *exec.Cmd
}

// KubeBinaries builds, once per machine, kube-apiserver, kubectl and etcd
// with scripts/k8s-bins.sh (cached under /opt/boxd-deps/k8s-KEY) and
// returns their directory. A failure is an error, never a reason to skip.
func KubeBinaries() (string, error) {
	out, err := runScript(filepath.Join(RepoRoot(), "scripts", "k8s-bins.sh"))
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1], nil
}

// StartKube starts etcd and kube-apiserver from bin under a fresh
// directory and waits for the API server's /readyz.
func StartKube(bin string) (*Kube, error) {
	dir, err := os.MkdirTemp("", "boxd-kube-")
	if err != nil {
		return nil, err
	}
	k := &Kube{Dir: dir, Bin: bin}
	if err := k.start(); err != nil {
		k.Stop()
		return nil, err
	}
	return k, nil
}

func (k *Kube) start() error {
	if err := writeKubeCerts(k.Dir); err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	client, peer, secure := ports[0], ports[1], ports[2]
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	k.etcd, err = k.spawn("etcd", filepath.Join(k.Bin, "etcd"), "--data-dir", filepath.Join(k.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test="+peerURL, "--name", "test", "--unsafe-no-fsync")
	if err != nil {
		return err
	}
	c := func(f string) string { return filepath.Join(k.Dir, f) }
	k.api, err = k.spawn("kube-apiserver", filepath.Join(k.Bin, "kube-apiserver"),
		"--etcd-servers="+etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(secure), "--tls-cert-file="+c("serving.crt"), "--tls-private-key-file="+c("serving.key"),
		"--client-ca-file="+c("ca.crt"), "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+c("sa.pub"), "--service-account-signing-key-file="+c("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC", "--allow-privileged=true",
		"--disable-admission-plugins=ServiceAccount", "--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type=none", "--cert-dir="+c("apiserver-certs"))
	if err != nil {
		return err
	}
	k.Server = fmt.Sprintf("https://127.0.0.1:%d", secure)
	k.Kubeconfig = c("kubeconfig")
	if err := os.WriteFile(k.Kubeconfig, []byte(kubeconfig(k.Server, k.Dir)), 0o600); err != nil {
		return err
	}
	return k.waitReady(60 * time.Second)
}

// spawn starts one program with its output in DIR/NAME.log.
func (k *Kube) spawn(name, bin string, args ...string) (*exec.Cmd, error) {
	logf, err := os.Create(filepath.Join(k.Dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return cmd, nil
}

// waitReady polls /readyz with the admin certificate.
func (k *Kube) waitReady(limit time.Duration) error {
	cfg, err := k.TLSConfig()
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 2 * time.Second}
	deadline := time.Now().Add(limit)
	for {
		resp, err := hc.Get(k.Server + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready after %s (%v):\n%s", limit, err, k.LogTail("kube-apiserver", 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TLSConfig is an admin client's: it trusts the test CA and presents the
// system:masters certificate.
func (k *Kube) TLSConfig() (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(k.Dir, "admin.crt"), filepath.Join(k.Dir, "admin.key"))
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(filepath.Join(k.Dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}, nil
}

// Kubectl runs kubectl against the server with the admin kubeconfig.
func (k *Kube) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(k.Bin, "kubectl"), append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// LogTail returns the last n lines of etcd's or kube-apiserver's log.
func (k *Kube) LogTail(name string, n int) string {
	b, _ := os.ReadFile(filepath.Join(k.Dir, name+".log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop ends both programs and removes the directory.
func (k *Kube) Stop() error {
	for _, c := range []*exec.Cmd{k.api, k.etcd} {
		if c != nil && c.Process != nil {
			_ = c.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _, _ = c.Process.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = c.Process.Kill()
				<-done
			}
		}
	}
	return os.RemoveAll(k.Dir)
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func kubeconfig(server, dir string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, server, filepath.Join(dir, "ca.crt"), filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key"))
}

// writeKubeCerts writes a CA, the API server's serving certificate (for
// 127.0.0.1 and localhost), an admin client certificate in group
// system:masters, and the service-account key pair.
func writeKubeCerts(dir string) error {
	ca, caKey, err := issueCert(dir, "ca", &x509.Certificate{Subject: pkix.Name{CommonName: "boxd-test-ca"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, nil, nil)
	if err != nil {
		return err
	}
	if _, _, err := issueCert(dir, "serving", &x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"},
		DNSNames: []string{"localhost", "kubernetes.default.svc"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, caKey); err != nil {
		return err
	}
	if _, _, err := issueCert(dir, "admin", &x509.Certificate{Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, caKey); err != nil {
		return err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa)); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)
}

var certSerial int64

// issueCert signs tmpl with parent (self-signed if nil) and writes
// NAME.crt and NAME.key into dir.
func issueCert(dir, name string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	certSerial++
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano() + certSerial)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(48*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate %s: %w", name, err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	if err := writePEM(filepath.Join(dir, name+".key"), "EC PRIVATE KEY", kb); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("certificate %s", name), err)
	}
	return cert, key, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
