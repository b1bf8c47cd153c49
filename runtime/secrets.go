//go:build linux

// Room: network. Secrets: the store's API for callers (owner-scoped) and
// a create's secrets, which the sandbox holds only as placeholders.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"strings"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/internal/secrets"
	"github.com/boxd-dev/boxd/network"
)

// MaxSecrets bounds the secrets one sandbox is given (they live in its
// network label).
const MaxSecrets = 8

// CABundlePath is where a sandbox given secrets finds its trust store:
// the host's bundle plus boxd's secrets CA, mounted read-only.
const CABundlePath = "/etc/ssl/certs/ca-certificates.crt"

// caEnv are the variables that point common clients at CABundlePath.
var caEnv = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE"}

// SecretUse is a secret a sandbox was given, as inspect shows it.
type SecretUse struct {
	Name  string
	Env   string
	Hosts []string
}

func (m *Manager) secretStore() (*secrets.Store, error) {
	if m.cfg.Network == nil || !m.cfg.Network.Brokering() {
		return nil, fmt.Errorf("secrets need egress networking, which this boxd does not have: %w", errdefs.ErrFailedPrecondition)
	}
	return m.cfg.Network.SecretStore(), nil
}

// secretErr maps the store's errors to the API's.
func secretErr(err error) error {
	switch {
	case errors.Is(err, secrets.ErrInvalid):
		msg := strings.TrimSuffix(err.Error(), ": "+secrets.ErrInvalid.Error())
		field, rest, _ := strings.Cut(msg, ": ")
		return &FieldError{Field: field, Msg: rest}
	case errors.Is(err, secrets.ErrNotFound):
		return fmt.Errorf("%s: %w", strings.TrimSuffix(err.Error(), ": "+secrets.ErrNotFound.Error())+" not found", errdefs.ErrNotFound)
	case errors.Is(err, secrets.ErrExists):
		return fmt.Errorf("%v: %w", err, errdefs.ErrAlreadyExists)
	}
	return err
}

// CreateSecret stores s as the caller's.
func (m *Manager) CreateSecret(ctx context.Context, s secrets.Secret) (secrets.Info, error) {
	st, err := m.secretStore()
	if err != nil {
		return secrets.Info{}, err
	}
	s.Owner = ownerUID(ctx)
	if err := st.Create(&s); err != nil {
		return secrets.Info{}, secretErr(err)
	}
	m.log.Info("secret created", "name", s.Name, "owner", s.Owner, "hosts", s.Hosts)
	return s.Info(), nil
}

// RotateSecret replaces the value of the caller's secret name; sandboxes
// that hold its placeholder get the new value from their next request.
func (m *Manager) RotateSecret(ctx context.Context, name, value string) (secrets.Info, error) {
	st, err := m.secretStore()
	if err != nil {
		return secrets.Info{}, err
	}
	info, err := st.Rotate(ownerUID(ctx), name, value)
	if err != nil {
		return secrets.Info{}, secretErr(err)
	}
	m.log.Info("secret rotated", "name", name, "owner", info.Owner)
	return info, nil
}

// RemoveSecret deletes the caller's secret name; placeholders of it go
// out unreplaced from then on.
func (m *Manager) RemoveSecret(ctx context.Context, name string) error {
	st, err := m.secretStore()
	if err != nil {
		return err
	}
	if err := st.Remove(ownerUID(ctx), name); err != nil {
		return secretErr(err)
	}
	m.log.Info("secret removed", "name", name, "owner", ownerUID(ctx))
	return nil
}

// ListSecrets is the caller's secrets (an admin's: everyone's), never
// their values.
func (m *Manager) ListSecrets(ctx context.Context) ([]secrets.Info, error) {
	st, err := m.secretStore()
	if err != nil {
		return nil, err
	}
	uid, only := restricted(ctx)
	if only {
		return st.List(uid, false)
	}
	return st.List(0, true)
}

// resolveSecrets gives a create its secrets (NAME or NAME=ENV, the
// caller's own): a placeholder each in its environment, and the trust
// store's variables.
func (m *Manager) resolveSecrets(specs []string, r *resolved) error {
	if len(specs) == 0 {
		return nil
	}
	if len(specs) > MaxSecrets {
		return fieldErr("secrets", "%d secrets, at most %d allowed", len(specs), MaxSecrets)
	}
	if r.network != network.ModeEgress {
		return fieldErr("secrets", "needs network mode %q: secrets are brokered at egress", network.ModeEgress)
	}
	st, err := m.secretStore()
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, spec := range specs {
		field := fmt.Sprintf("secrets[%d]", i)
		name, env, ok := strings.Cut(spec, "=")
		if !ok {
			env = name
		}
		if err := secrets.ValidName(field, name); err != nil {
			return secretErr(err)
		}
		if !envNameRe.MatchString(env) {
			return fieldErr(field, "%q is not an environment variable name (give NAME=ENVVAR)", env)
		}
		if seen[env] || seen["secret:"+name] {
			return fieldErr(field, "%q: the secret or its variable is given twice", spec)
		}
		seen[env], seen["secret:"+name] = true, true
		sec, err := st.Get(r.owner, name)
		if err != nil {
			return fmt.Errorf("%s: %w", field, secretErr(err))
		}
		b := network.Brokered{Name: name, Env: env, Placeholder: secrets.Placeholder(), Hosts: sec.Hosts}
		r.secrets = append(r.secrets, b)
		r.env = append(r.env, env+"="+b.Placeholder)
	}
	for _, k := range caEnv {
		r.env = append(r.env, k+"="+CABundlePath)
	}
	return nil
}

// secretMounts writes sandbox id's trust store and mounts it over the
// image's, read-only: the host's bundle and the secrets CA.
func (m *Manager) secretMounts(id string, r resolved) ([]specs.Mount, error) {
	if len(r.secrets) == 0 {
		return nil, nil
	}
	p := filepath.Join(m.sandboxDir(id), "ca-bundle.pem")
	if err := os.WriteFile(p, m.cfg.Network.SecretsCA().Bundle(), 0o644); err != nil {
		return nil, fmt.Errorf("secrets: trust store: %w", err)
	}
	return []specs.Mount{{Destination: CABundlePath, Type: "bind", Source: p,
		Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}}}, nil
}

// secretUses is what inspect shows of st's secrets.
func secretUses(list []network.Brokered) []SecretUse {
	var out []SecretUse
	for _, b := range list {
		out = append(out, SecretUse{Name: b.Name, Env: b.Env, Hosts: b.Hosts})
	}
	return out
}
