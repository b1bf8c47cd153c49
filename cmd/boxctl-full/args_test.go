package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestFlagsFirst: the argv flagsFirst gives urfave/cli for boxctl's real
// command tree. cmd/boxctl's TestFlagsAfterArguments runs such lists
// through both binaries against a scripted boxd.
func TestFlagsFirst(t *testing.T) {
	app := &cli.App{
		Flags:    []cli.Flag{&cli.StringFlag{Name: "socket"}},
		Commands: commands(),
	}
	for _, tc := range []struct{ in, want string }{
		{"fork ID -n 2", "fork -n 2 ID"},
		{"--socket /s fork ID -n=2 --name a", "--socket /s fork -n=2 --name a ID"},
		{"update ID --extend 30m -e A=1", "update --extend 30m -e A=1 ID"},
		{"rm A -f B --time 3s", "rm -f --time 3s A B"},
		{"image rm REF --force", "image rm --force REF"},
		{"image tag A B -f", "image tag -f A B"},
		{"files read ID /p --offset 3", "files read --offset 3 ID /p"},
		{"session rm ID NAME --help", "session rm --help ID NAME"},
		{"rm ID -- -x", "rm -- ID -x"},
		{"rm -f -- -x", "rm -f -- -x"},
		{"fork ID --bogus 2", "fork --bogus ID 2"},
		{"update ID --extend", "update --extend"},
		{"build . -t x -f Dockerfile", "build -t x -f Dockerfile ."},
		// The commands that take a command line are left as written.
		{"exec ID ls -la", "exec ID ls -la"},
		{"exec ID --timeout 5s -- true", "exec ID --timeout 5s -- true"},
		{"run --image x ls -la", "run --image x ls -la"},
		{"session exec ID NAME ls -la", "session exec ID NAME ls -la"},
		{"session run ID NAME -- ls -la", "session run ID NAME -- ls -la"},
		// Nothing to do.
		{"ls", "ls"},
		{"nosuch ID -x", "nosuch ID -x"},
		{"-- fork ID -n 2", "-- fork ID -n 2"},
	} {
		in := append([]string{"boxctl"}, strings.Fields(tc.in)...)
		want := append([]string{"boxctl"}, strings.Fields(tc.want)...)
		if got := flagsFirst(app, in); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %q, want %q", tc.in, got[1:], want[1:])
		}
	}
}
