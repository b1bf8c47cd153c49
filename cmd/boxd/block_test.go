//go:build linux

package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// --block (config key block) takes IPv4 and IPv6 CIDRs and addresses; anything
// else stops boxd with the flag, the value and, from the config, the
// file, line and key named.
func TestBlockFlag(t *testing.T) {
	check := func(config string, args ...string) error {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.toml")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		app := newApp()
		app.Action = func(cc *cli.Context) error {
			_, err := newNetwork(cc, slog.New(slog.DiscardHandler))
			return fromConfig(cc, err)
		}
		return app.Run(append([]string{"boxd", "--config", path, "--state-dir", dir}, args...))
	}
	if err := check("block = [\"10.0.0.0/8\", \"192.0.2.7\", \"2001:db8::/32\"]\n", "--dns-upstream", "192.0.2.53"); err != nil {
		t.Errorf("good block list refused: %v", err)
	}
	for _, c := range []struct {
		config string
		args   []string
		words  []string
	}{
		{"# x\nblock = [\"10.0.0.0/8\", \"fd00:ec2::/16\"]\n", nil, []string{"config.toml:2: key block", "--block", "fd00:ec2::/16", "host bits"}},
		{"", []string{"--block", "::ffff:10.0.0.1"}, []string{"--block", "as IPv4"}},
		{"", []string{"--block", "10.1.0.0/8"}, []string{"--block", "host bits", "10.0.0.0/8"}},
		{"", []string{"--block", "metadata.example"}, []string{"--block", "metadata.example"}},
	} {
		err := check(c.config, c.args...)
		for _, w := range c.words {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("block %q %v: error %v, want it to name %q", c.config, c.args, err, w)
			}
		}
	}
}
