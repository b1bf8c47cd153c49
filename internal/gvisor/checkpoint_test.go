package gvisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunscWrapper: the runsc the shim runs passes every call to runsc
// unchanged, except the start of a sandbox marked restoring, which
// becomes a restore from that sandbox's image.
func TestRunscWrapper(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "runsc")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nfor a do printf '[%s]' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sbs := filepath.Join(dir, "sandboxes")
	ck := filepath.Join(sbs, "abc", "checkpoint")
	if err := os.MkdirAll(filepath.Join(ck, ImageName), 0o700); err != nil {
		t.Fatal(err)
	}
	wrapper, err := WriteWrapper(filepath.Join(dir, "g"), Info{Runsc: fake}, sbs)
	if err != nil {
		t.Fatal(err)
	}
	run := func(args string) string {
		t.Helper()
		out, err := exec.Command(wrapper, strings.Fields(args)...).Output()
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		return string(out)
	}
	plain := "[--root=/r][--log=l][start][abc]"
	if got := run("--root=/r --log=l start abc"); got != plain {
		t.Errorf("start, not restoring: %s", got)
	}
	if err := os.WriteFile(filepath.Join(ck, RestoringName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ args, want string }{
		{"--root=/r --log=l start abc", "[--root=/r][--log=l][restore][--image-path=" + ck + "/image][--detach][abc]"},
		{"--root=/r state abc", "[--root=/r][state][abc]"},
		{"--root=/r kill abc start", "[--root=/r][kill][abc][start]"},
		{"--root=/r start other", "[--root=/r][start][other]"},
		{"--root=/r start ../abc", "[--root=/r][start][../abc]"},
		{"start", "[start]"},
	} {
		if got := run(c.args); got != c.want {
			t.Errorf("%s: runsc got %s, want %s", c.args, got, c.want)
		}
	}
	// Without the image (restored and removed) a start is a start.
	if err := os.Remove(filepath.Join(ck, ImageName)); err != nil {
		t.Fatal(err)
	}
	if got := run("--root=/r --log=l start abc"); got != plain {
		t.Errorf("start without the image: %s", got)
	}
	if _, err := WriteWrapper(dir, Info{Runsc: fake}, "/x'y"); err == nil {
		t.Error("a quote in the sandboxes path was accepted")
	}
}
