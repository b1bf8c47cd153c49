//go:build linux

package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	"github.com/boxd-dev/boxd/rpc/lite"
)

func TestDefaultSocket(t *testing.T) {
	if defaultSocket != apiwire.DefaultSocket {
		t.Fatalf("front's default socket %q, the full CLI's %q", defaultSocket, apiwire.DefaultSocket)
	}
}

// TestParseExec: what the fast path serves and how it reads it; the rest
// goes to the full CLI. e2e's TestFrontMatchesFullCLI checks the fast path
// against the full CLI through a real boxd.
func TestParseExec(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	type want struct {
		socket string
		req    lite.ExecRequest
	}
	served := func(socket, id string, args ...string) *want {
		return &want{socket, lite.ExecRequest{SandboxID: id, Args: args}}
	}
	with := func(w *want, f func(*lite.ExecRequest)) *want { f(&w.req); return w }
	cases := []struct {
		argv string // split on spaces; "_" is an empty argument
		env  map[string]string
		want *want // nil: full CLI
	}{
		{argv: "exec ID -- true", want: served(defaultSocket, "ID", "true")},
		{argv: "exec ID true", want: served(defaultSocket, "ID", "true")},
		{argv: "exec -- ID true", want: served(defaultSocket, "ID", "true")},
		{argv: "exec -- ID -- true", want: served(defaultSocket, "ID", "true")},
		{argv: "exec ID -- -- true", want: served(defaultSocket, "ID", "--", "true")},
		{argv: "exec ID -- sh -c -e", want: served(defaultSocket, "ID", "sh", "-c", "-e")},
		{argv: "exec ID sh -i", want: served(defaultSocket, "ID", "sh", "-i")},
		{argv: "exec _ true", want: served(defaultSocket, "", "true")},
		{argv: "exec - true", want: served(defaultSocket, "-", "true")},
		{argv: "--socket /s exec ID true", want: served("/s", "ID", "true")},
		{argv: "-socket=/s exec ID true", want: served("/s", "ID", "true")},
		{argv: "--socket /a --socket=/b exec ID true", want: served("/b", "ID", "true")},
		{argv: "exec ID true", env: map[string]string{"BOXD_SOCKET": "/e"}, want: served("/e", "ID", "true")},
		{argv: "--socket /s exec ID true", env: map[string]string{"BOXD_SOCKET": "/e"}, want: served("/s", "ID", "true")},
		{argv: "--instance ci exec ID true", want: served("/run/boxd-ci/boxd.sock", "ID", "true")},
		{argv: "--instance=default exec ID true", want: served(defaultSocket, "ID", "true")},
		{argv: "exec ID true", env: map[string]string{"BOXD_INSTANCE": "ci"}, want: served("/run/boxd-ci/boxd.sock", "ID", "true")},
		{argv: "--instance ci exec ID true", env: map[string]string{"BOXD_INSTANCE": "b"}, want: served("/run/boxd-ci/boxd.sock", "ID", "true")},
		{argv: "--instance ci --socket /s exec ID true", want: served("/s", "ID", "true")},
		{argv: "--instance ci exec ID true", env: map[string]string{"BOXD_SOCKET": "/e"}, want: served("/e", "ID", "true")},
		{argv: "--instance Bad exec ID true"},
		{argv: "exec --timeout 5s -e A=1 -e=B=2=3 -w /w ID true", want: with(served(defaultSocket, "ID", "true"), func(r *lite.ExecRequest) {
			r.Timeout, r.Env, r.Workdir = "5s", []string{"A=1", "B=2=3"}, "/w"
		})},
		{argv: "exec -timeout=1s --timeout 2s --workdir /a --workdir=/b ID true", want: with(served(defaultSocket, "ID", "true"), func(r *lite.ExecRequest) {
			r.Timeout, r.Workdir = "2s", "/b"
		})},
		{argv: "exec --timeout -5s -w -x ID true", want: with(served(defaultSocket, "ID", "true"), func(r *lite.ExecRequest) {
			r.Timeout, r.Workdir = "-5s", "-x"
		})},
		{argv: "exec --timeout= ID true", want: served(defaultSocket, "ID", "true")},

		// The full CLI's.
		{argv: "--host https://h:7443 exec ID true"},
		{argv: "exec ID true", env: map[string]string{"BOXD_HOST": "https://h:7443"}},
		{argv: "--socket /s exec ID true", env: map[string]string{"BOXD_HOST": "https://h:7443"}},
		{argv: ""},
		{argv: "ls"},
		{argv: "run -- true"},
		{argv: "exec"},
		{argv: "exec ID"},
		{argv: "exec ID --"},
		{argv: "exec -- ID"},
		{argv: "exec -i ID cat"},
		{argv: "exec -it ID sh"},
		{argv: "exec -t ID sh"},
		{argv: "exec -d ID sleep 1"},
		{argv: "exec -u 1000 ID id"},
		{argv: "exec --user=root ID id"},
		{argv: "exec --interactive ID cat"},
		{argv: "exec -h"},
		{argv: "exec --help ID true"},
		{argv: "exec --bogus ID true"},
		{argv: "exec ---timeout 1s ID true"},
		{argv: "exec -=x ID true"},
		{argv: "exec --timeout"},
		{argv: "exec -e A=1,B=2 ID true"},
		{argv: "exec -e _A=1 ID true"},
		{argv: "exec -e _ ID true"},
		{argv: "exec -e= ID true"},
		{argv: "exec -e A=1 --env B=2 ID true"},
		{argv: "exec -w /a --workdir /b ID true"},
		{argv: "--socket= exec ID true"},
		{argv: "exec ID true", env: map[string]string{"BOXD_SOCKET": ""}},
		{argv: "-h exec ID true"},
		{argv: "--help"},
		{argv: "-- exec ID true"},
		{argv: "--bogus exec ID true"},
		{argv: "--socket"},
		{argv: "exec ID \xff"},
		{argv: "exec \xff true"},
		{argv: "exec -e A=\xff ID true"},
		{argv: "exec --socket /s ID true"},
		{argv: "exec help true"},
		{argv: "exec -- h true"},
		{argv: "exec --env=A=1 --env B=2 ID true", want: with(served(defaultSocket, "ID", "true"), func(r *lite.ExecRequest) { r.Env = []string{"A=1", "B=2"} })},
	}
	for _, tc := range cases {
		argv := []string{}
		if tc.argv != "" {
			argv = strings.Split(tc.argv, " ")
		}
		for i, a := range argv {
			if a == "_" {
				argv[i] = ""
			} else {
				argv[i] = strings.ReplaceAll(a, "_", " ")
			}
		}
		env = tc.env
		inv, why := parseExec(argv, getenv)
		switch {
		case tc.want == nil && why == "":
			t.Errorf("%q: fast path serves %+v, want the full CLI", argv, inv)
		case tc.want != nil && why != "":
			t.Errorf("%q: full CLI (%s), want %+v", argv, why, tc.want)
		case tc.want != nil && (inv.socket != tc.want.socket || !reflect.DeepEqual(inv.req, tc.want.req)):
			t.Errorf("%q: %+v, want %+v", argv, inv, tc.want)
		}
	}
}
