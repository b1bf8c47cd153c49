package mcpserver

import (
	"strings"
	"testing"
	"time"
)

func TestExecArgs(t *testing.T) {
	for _, tc := range []struct {
		in   execIn
		want string
		err  string
	}{
		{execIn{SandboxID: "s", Command: "echo hi"}, "/bin/sh -c echo hi", ""},
		{execIn{SandboxID: "s", Args: []string{"ls", "-l"}}, "ls -l", ""},
		{execIn{SandboxID: "s", Command: "x", Args: []string{"y"}}, "", "not both"},
		{execIn{SandboxID: "s"}, "", "command or args is required"},
		{execIn{Command: "x"}, "", "sandbox_id is required"},
	} {
		got, err := execArgs(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("%+v: %q %v, want %q", tc.in, got, err, tc.want)
		}
	}
}

// The notices an LLM needs are in the text, not only in the structured
// result: a client may show the model text alone.
func TestExecText(t *testing.T) {
	s := execText(execOut{ExitCode: 124, TimedOut: true, Truncated: true, Stdout: "out", Stderr: "err\n"}, 5*time.Second, 100)
	for _, want := range []string{"exit code: 124\n", "[timed out: killed after 5s]", "[output truncated: only the first 100 bytes", "--- stdout ---\nout\n--- stderr ---\nerr\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	if p := printable([]byte("a\xffb")); p != "a\uFFFDb" {
		t.Errorf("printable = %q", p)
	}
}

func TestTail(t *testing.T) {
	tl := tail{max: 5}
	tl.write([]byte("abc"))
	tl.write([]byte("defg"))
	if string(tl.buf) != "cdefg" || tl.dropped != 2 {
		t.Errorf("tail = %q, dropped %d", tl.buf, tl.dropped)
	}
}
