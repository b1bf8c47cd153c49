//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// buildContext writes files (name -> content) under a new directory.
func buildContext(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

// buildSteps parses boxctl build's step lines: "cached" or a duration per step.
func buildSteps(stderr string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.HasPrefix(l, "step ") {
			out = append(out, l[strings.LastIndex(l, ": ")+2:])
		}
	}
	return out
}

const buildDockerfile = `# a multi-step build
ARG BASE=boxd/busybox:latest
FROM $BASE
ENV APP_MODE=built
ARG GREETING=hi
WORKDIR /opt/app
COPY app/ ./src/
RUN cat src/hello.txt > out.txt && echo "$APP_MODE $GREETING" >> out.txt && mkdir home && chown 1000:1000 home
USER 1000
RUN ["sh", "-c", "id -u > home/uid"]
LABEL org.example.team=infra
EXPOSE 8080
ENTRYPOINT ["/bin/sh", "-c"]
CMD ["cat out.txt"]
`

// TestBuild: a multi-step Dockerfile builds; its config and files are as
// the Dockerfile says (a sandbox made from it sees them); an unchanged
// rebuild, even after boxd was killed and restarted, takes every step
// from the cache and gives the same image; a
// changed copied file rebuilds from its COPY on.
func TestBuild(t *testing.T) {
	const ref = "built/app:v1"
	dir := buildContext(t, map[string]string{
		"Dockerfile":        buildDockerfile,
		"app/hello.txt":     "hello\n",
		"app/sub/data.txt":  "data-1\n",
		"unrelated/big.txt": "not copied\n",
	})
	t.Cleanup(func() { boxctl(nil, "image", "rm", ref) })
	sbBefore := mustOut(t, "ls")

	out, stderr, code := boxctlRun("build", "-t", ref, "--build-arg", "GREETING=yo", dir)
	if code != 0 {
		t.Fatalf("build: exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(out, ref+"\tsha256:") {
		t.Fatalf("build printed %q", out)
	}
	digest := strings.TrimSpace(strings.SplitN(out, "\t", 2)[1])
	steps := buildSteps(stderr)
	if len(steps) != 11 {
		t.Fatalf("build reported %d steps, want 11:\n%s", len(steps), stderr)
	}

	cfg, _ := committedImage(t, ref)
	c := cfg.Config
	if !slices.Contains(c.Env, "APP_MODE=built") || c.WorkingDir != "/opt/app" || c.User != "1000" ||
		c.Labels["org.example.team"] != "infra" || len(c.ExposedPorts) != 1 ||
		!slices.Equal(c.Entrypoint, []string{"/bin/sh", "-c"}) || !slices.Equal(c.Cmd, []string{"cat out.txt"}) {
		t.Errorf("image config: %+v", c)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports %v", c.ExposedPorts)
	}
	for _, e := range c.Env {
		if strings.HasPrefix(e, "GREETING=") {
			t.Errorf("ARG leaked into the image env: %v", c.Env)
		}
	}

	id := newSandbox(t, "--image", ref)
	got := sh(t, id, `cd /opt/app && cat out.txt && stat -c '%u:%g' out.txt home && cat src/sub/data.txt home/uid && echo "$APP_MODE" && (test -e src/app && echo nested || echo flat) && (test -e /opt/app/unrelated && echo leaked || echo clean)`)
	want := "hello\nbuilt yo\n0:0\n1000:1000\ndata-1\n1000\nbuilt\nflat\nclean\n"
	if got != want {
		t.Errorf("sandbox from the built image:\n%s\nwant:\n%s", got, want)
	}
	if _, err := boxctl(nil, "rm", "-f", id); err != nil {
		t.Fatal(err)
	}
	if after := mustOut(t, "ls"); after != sbBefore {
		t.Errorf("build left sandboxes:\nbefore %s\nafter %s", sbBefore, after)
	}
	if ls := mustOut(t, "image", "ls"); strings.Contains(ls, "build-cache") {
		t.Errorf("image ls shows the step cache:\n%s", ls)
	}

	// Unchanged, after a boxd restart (SIGKILL): every step from the
	// cache, which lives in containerd, and the same image.
	killDaemon()
	must(t, startDaemon())
	t0 := time.Now()
	out, stderr, code = boxctlRun("build", "--force", "-t", ref, "--build-arg", "GREETING=yo", dir)
	took := time.Since(t0)
	if code != 0 {
		t.Fatalf("rebuild: exit %d: %s", code, stderr)
	}
	t.Logf("cached rebuild took %v", took)
	for i, s := range buildSteps(stderr) {
		if s != "cached" {
			t.Errorf("rebuild step %d not cached: %s\n%s", i+1, s, stderr)
		}
	}
	if d := strings.TrimSpace(strings.SplitN(out, "\t", 2)[1]); d != digest {
		t.Errorf("cached rebuild gave %s, first build %s", d, digest)
	}

	// A changed copied file reruns from its COPY (step 4) on.
	must(t, os.WriteFile(filepath.Join(dir, "app/sub/data.txt"), []byte("data-2\n"), 0o644))
	out, stderr, code = boxctlRun("build", "--force", "-t", ref, "--build-arg", "GREETING=yo", dir)
	if code != 0 {
		t.Fatalf("build after a change: exit %d: %s", code, stderr)
	}
	steps = buildSteps(stderr)
	for i, s := range steps {
		// ENV, ARG and WORKDIR come before the COPY.
		if cached := s == "cached"; cached != (i < 3) {
			t.Errorf("after a change, step %d: %s\n%s", i+1, s, stderr)
		}
	}
	id = newSandbox(t, "--image", ref)
	if got := sh(t, id, "cat /opt/app/src/sub/data.txt"); got != "data-2\n" {
		t.Errorf("rebuilt image has %q", got)
	}
}

// TestBuildBadInput: each bad Dockerfile or context fails naming the line
// (and what was wrong), leaves no image under the name and no sandbox.
func TestBuildBadInput(t *testing.T) {
	const ref = "built/bad:v1"
	if _, err := boxctl(nil, "image", "import", "--rootfs", env.busybox, "--name", "built/exists:v1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { boxctl(nil, "image", "rm", "built/exists:v1") })
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret\n"), 0o600))
	sbBefore, imgBefore := mustOut(t, "ls"), mustOut(t, "image", "ls")

	for _, tc := range []struct {
		name, dockerfile string
		setup            func(dir string)
		ref, code, want  string
	}{
		{name: "syntax", dockerfile: "FROM boxd/busybox:latest\nRUN true\nENV\n", code: "invalid_argument", want: "Dockerfile line 3: ENV"},
		{name: "unsupported", dockerfile: "FROM boxd/busybox:latest\nRUN true\nHEALTHCHECK CMD true\n", code: "invalid_argument", want: "Dockerfile line 3: HEALTHCHECK is not supported"},
		{name: "multistage", dockerfile: "FROM boxd/busybox:latest AS a\nRUN true\nFROM a\n", code: "invalid_argument", want: "Dockerfile line 3: a second FROM"},
		{name: "outside", dockerfile: "FROM boxd/busybox:latest\nCOPY ../outside /x\n", code: "invalid_argument", want: "Dockerfile line 2: COPY ../outside /x: refused"},
		{name: "symlink", dockerfile: "FROM boxd/busybox:latest\nRUN true\nCOPY link /x\n", code: "invalid_argument", want: "Dockerfile line 3: COPY link /x: refused",
			setup: func(dir string) { must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link"))) }},
		{name: "symlink-in-dir", dockerfile: "FROM boxd/busybox:latest\nCOPY d /x\n", code: "invalid_argument", want: "Dockerfile line 2: COPY d /x: refused",
			setup: func(dir string) {
				must(t, os.MkdirAll(filepath.Join(dir, "d"), 0o755))
				must(t, os.Symlink("../../"+filepath.Base(outside)+"/secret", filepath.Join(dir, "d", "up")))
			}},
		{name: "missing", dockerfile: "FROM boxd/busybox:latest\nCOPY nosuch /x\n", code: "invalid_argument", want: "Dockerfile line 2: COPY nosuch /x"},
		{name: "add-url", dockerfile: "FROM boxd/busybox:latest\nADD http://127.0.0.1:1/x /x\n", code: "invalid_argument", want: "Dockerfile line 2: ADD of a URL"},
		{name: "run-fails", dockerfile: "FROM boxd/busybox:latest\nENV A=1\nRUN echo boom-output >&2; exit 3\n", code: "failed_precondition", want: "Dockerfile line 3: RUN echo boom-output >&2; exit 3: failed (exit code 3); output ends: boom-output"},
		{name: "from-unknown", dockerfile: "FROM nosuch/image:v9\nRUN true\n", code: "not_found", want: "Dockerfile line 1: FROM nosuch/image:v9"},
		{name: "exists", dockerfile: "FROM boxd/busybox:latest\nRUN true\n", ref: "built/exists:v1", code: "already_exists", want: `image "built/exists:v1" already exists`},
		{name: "bad-ref", dockerfile: "FROM boxd/busybox:latest\n", ref: "Bad Ref!", code: "invalid_argument", want: "ref: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := buildContext(t, map[string]string{"Dockerfile": tc.dockerfile, "ok.txt": "ok\n"})
			if tc.setup != nil {
				tc.setup(dir)
			}
			r := tc.ref
			if r == "" {
				r = ref
			}
			_, stderr, code := boxctlRun("build", "-t", r, dir)
			if code == 0 || !strings.Contains(stderr, tc.code) || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, %q; want %s naming %q", code, stderr, tc.code, tc.want)
			}
			if strings.Contains(stderr, "host secret") {
				t.Errorf("the error shows the file outside the context: %q", stderr)
			}
		})
	}
	if after := mustOut(t, "ls"); after != sbBefore {
		t.Errorf("failed builds left sandboxes:\nbefore %s\nafter %s", sbBefore, after)
	}
	if after := mustOut(t, "image", "ls"); after != imgBefore {
		t.Errorf("failed builds left images:\nbefore %s\nafter %s", imgBefore, after)
	}
}
