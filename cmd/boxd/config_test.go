//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// runWith runs boxd's flag handling with args and the config text, and
// returns the context run would get (run itself is replaced).
func runWith(t *testing.T, config string, args ...string) (*cli.Context, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	app := newApp()
	var got *cli.Context
	app.Action = func(cc *cli.Context) error { got = cc; return nil }
	err := app.Run(append([]string{"boxd", "--config", path}, args...))
	return got, err
}

// TestConfigEveryFlag: every flag has a config key, which sets it, and a
// flag on the command line wins over the file.
func TestConfigEveryFlag(t *testing.T) {
	var b strings.Builder
	want := map[string]string{}
	for _, f := range newApp().Flags {
		name := f.Names()[0]
		if name == "config" {
			continue
		}
		var toml, val string
		switch f.(type) {
		case *cli.StringFlag:
			val = "v-" + name
			if name == "max-memory-total" || name == "default-memory" || name == "max-memory-per-user" || name == "audit-max-size" {
				val = "64m"
			}
			toml = fmt.Sprintf("%q", val)
		case *cli.StringSliceFlag:
			val = "[a b]"
			toml = `["a", "b"]`
		case *cli.BoolFlag:
			val, toml = "true", "true"
		case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag:
			val, toml = "7", "7"
		case *cli.Float64Flag:
			val, toml = "1.5", "1.5"
		case *cli.DurationFlag:
			val, toml = "1m30s", `"90s"`
		default:
			t.Fatalf("flag %s: type %T has no config test", name, f)
		}
		fmt.Fprintf(&b, "%s = %s\n", name, toml)
		want[name] = val
	}
	cc, err := runWith(t, b.String(), "--debug=false", "--socket-group", "flag-wins")
	if err != nil {
		t.Fatal(err)
	}
	want["debug"], want["socket-group"] = "false", "flag-wins"
	for name, v := range want {
		got := fmt.Sprint(cc.Value(name))
		if _, ok := cc.Value(name).(cli.StringSlice); ok {
			got = fmt.Sprint(cc.StringSlice(name))
		}
		if d, ok := cc.Value(name).(time.Duration); ok {
			got = d.String()
		}
		if got != v {
			t.Errorf("%s = %s, want %s", name, got, v)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		words        []string
	}{
		{"syntax", "socket = \"/run/x\"\nmax-sandboxes = = 3\n", []string{"config.toml:2"}},
		{"unknown key", "socket = \"/run/x\"\n\nmax-sandbox = 3\n", []string{"config.toml:3", "key max-sandbox", "not a boxd setting"}},
		{"bad value", "# boxd\nmax-sandboxes = \"many\"\n", []string{"config.toml:2", "key max-sandboxes", `"many"`}},
		{"list for a single flag", "socket = [\"a\"]\n", []string{"config.toml:1", "key socket", "list"}},
		{"table", "[network]\nbridge = \"x\"\n", []string{"config.toml:1", "key network"}},
	} {
		_, err := runWith(t, tc.config)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, w := range tc.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v does not name %q", tc.name, err, w)
			}
		}
	}
}

// A value the flag takes but boxd's checks refuse later names the file,
// line and key when it came from the config, and only then.
func TestConfigValueRefusedAfterParsing(t *testing.T) {
	check := func(config string, args ...string) error {
		path := filepath.Join(t.TempDir(), "config.toml")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		app := newApp()
		app.Action = func(cc *cli.Context) error {
			_, err := parseLimits(cc)
			return fromConfig(cc, err)
		}
		return app.Run(append([]string{"boxd", "--config", path}, args...))
	}
	err := check("# limits\nsocket = \"/run/x\"\ndefault-pids = -4\n")
	if err == nil || !strings.Contains(err.Error(), "config.toml:3: key default-pids: --default-pids: -4 must be positive") {
		t.Errorf("refused config value: %v, want the file, line and key named", err)
	}
	err = check("socket = \"/run/x\"\n", "--default-pids", "-4")
	if err == nil || strings.Contains(err.Error(), "config.toml") || !strings.HasPrefix(err.Error(), "--default-pids") {
		t.Errorf("refused command-line value: %v, want the flag named and no file", err)
	}
}
