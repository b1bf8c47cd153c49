package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// Registry credentials are read here, by boxctl, as the calling user, and
// sent with the request: boxd never reads a caller's files.

func authFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "username", Aliases: []string{"u"}, Usage: "registry user name (the password comes from --password-stdin); default: the docker config's login for the registry"},
		&cli.BoolFlag{Name: "password-stdin", Usage: "read the registry password (or token) from stdin"},
	}
}

// registryHost is the registry a reference names, by docker's rule (the
// first component holds a "." or ":" or is "localhost"), or "" if none:
// boxd then refuses the reference, and boxctl sends no credentials.
func registryHost(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	if !ok {
		return ""
	}
	if first == "localhost" || strings.ContainsAny(first, ".:") {
		return first
	}
	return ""
}

// registryAuth is the login to send for ref: --username with
// --password-stdin, else the docker config's entry for its host, else
// none (anonymous).
func registryAuth(c *cli.Context, ref string) (*boxdv1.RegistryAuth, error) {
	user, fromStdin := c.String("username"), c.Bool("password-stdin")
	if fromStdin || user != "" {
		if !fromStdin || user == "" {
			return nil, fmt.Errorf("--username and --password-stdin go together")
		}
		pw, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
		if err != nil {
			return nil, fmt.Errorf("--password-stdin: %w", err)
		}
		p := strings.TrimRight(string(pw), "\r\n")
		if p == "" {
			return nil, fmt.Errorf("--password-stdin: stdin is empty")
		}
		return &boxdv1.RegistryAuth{Username: user, Password: p}, nil
	}
	host := registryHost(ref)
	if host == "" {
		return nil, nil
	}
	return dockerConfigAuth(host)
}

// dockerConfig is the part of docker's config.json boxctl reads.
type dockerConfig struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		Username      string `json:"username"`
		Password      string `json:"password"`
		IdentityToken string `json:"identitytoken"`
	} `json:"auths"`
	CredsStore  string            `json:"credsStore"`
	CredHelpers map[string]string `json:"credHelpers"`
}

func dockerConfigPath() string {
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		return filepath.Join(d, "config.json")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".docker", "config.json")
}

// dockerConfigAuth finds host's login in the docker config: a credential
// helper (credHelpers, credsStore) or an "auths" entry. No config, or no
// entry, is an anonymous pull.
func dockerConfigAuth(host string) (*boxdv1.RegistryAuth, error) {
	p := dockerConfigPath()
	if p == "" || host == "" {
		return nil, nil
	}
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("docker config: %w", err)
	}
	var cfg dockerConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("docker config %s: %w", p, err)
	}
	if h := cfg.CredHelpers[host]; h != "" {
		return credentialHelper(h, host)
	}
	for key, a := range cfg.Auths {
		if authKeyHost(key) != host {
			continue
		}
		out := &boxdv1.RegistryAuth{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken}
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("docker config %s: auths[%q].auth is not base64: %w", p, key, err)
			}
			u, pw, ok := strings.Cut(string(dec), ":")
			if !ok {
				return nil, fmt.Errorf("docker config %s: auths[%q].auth is not USER:PASSWORD", p, key)
			}
			out.Username, out.Password = u, pw
		}
		return out, nil
	}
	if cfg.CredsStore != "" {
		return credentialHelper(cfg.CredsStore, host)
	}
	return nil, nil
}

// authKeyHost reduces an "auths" key ("https://HOST/v1/", "HOST:PORT") to
// its host.
func authKeyHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	h, _, _ := strings.Cut(key, "/")
	return h
}

// credentialHelper runs docker-credential-NAME get, docker's protocol: the
// host on stdin, {"Username","Secret"} on stdout ("<token>" as the user
// name means Secret is an identity token). A helper that knows no login
// for the host is an anonymous pull.
func credentialHelper(name, host string) (*boxdv1.RegistryAuth, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker-credential-"+name, "get")
	cmd.Stdin = strings.NewReader(host + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stdout.String() + stderr.String())
		if strings.Contains(msg, "credentials not found") {
			return nil, nil
		}
		return nil, fmt.Errorf("credential helper docker-credential-%s: %v: %s", name, err, firstLine(msg))
	}
	var out struct{ Username, Secret string }
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("credential helper docker-credential-%s: %w", name, err)
	}
	if out.Username == "<token>" {
		return &boxdv1.RegistryAuth{IdentityToken: out.Secret}, nil
	}
	return &boxdv1.RegistryAuth{Username: out.Username, Password: out.Secret}, nil
}

func firstLine(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	if sc.Scan() {
		return sc.Text()
	}
	return ""
}
