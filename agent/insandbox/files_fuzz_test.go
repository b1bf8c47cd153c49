package insandbox

import (
	"errors"
	"path"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/boxd-dev/boxd/agent/wire"
)

type runtimeMemStats struct{ ms runtime.MemStats }

func (m *runtimeMemStats) heapInUse() uint64 {
	runtime.ReadMemStats(&m.ms)
	return m.ms.HeapInuse
}

// FuzzCleanFilePath: whatever the host sends, the init either refuses it as
// an invalid argument or works on a clean absolute path within the limits,
// the one the kernel would reach by the same text from the workdir.
func FuzzCleanFilePath(f *testing.F) {
	for _, s := range []string{
		"", "/", ".", "..", "a", "/a/b", "a/../../..", "/../../etc/passwd", "../../../../workspace/x",
		"a//b/./c/", "a\x00b", strings.Repeat("a/", 2100), strings.Repeat("x", 256), strings.Repeat("x", 255),
		"/" + strings.Repeat("../", 1400) + "a", "~/x", "a/\n/b", "\xff\xfe",
	} {
		f.Add("/workspace", s)
		f.Add("/", s)
	}
	f.Fuzz(func(t *testing.T, workdir, p string) {
		if !path.IsAbs(workdir) || path.Clean(workdir) != workdir || wire.CheckFilePath(workdir) != nil {
			return
		}
		c, err := cleanFilePath(workdir, p)
		if err != nil {
			if !errors.Is(err, wire.ErrInvalid) {
				t.Fatalf("%q: error %v is not invalid-argument", p, err)
			}
			if len(err.Error()) > 400 || !utf8.ValidString(err.Error()) {
				t.Fatalf("%q: unwieldy error %q", p, err)
			}
			return
		}
		if !path.IsAbs(c) || path.Clean(c) != c || len(c) > wire.MaxPathLen || strings.IndexByte(c, 0) >= 0 {
			t.Fatalf("%q -> %q: not a clean absolute path within limits", p, c)
		}
		for _, comp := range strings.Split(c, "/") {
			if comp == ".." || comp == "." || len(comp) > wire.MaxNameLen {
				t.Fatalf("%q -> %q: component %q", p, c, comp)
			}
		}
		want := path.Clean(p)
		if !path.IsAbs(p) {
			want = path.Clean(workdir + "/" + p)
		}
		if c != want {
			t.Fatalf("%q -> %q, want %q", p, c, want)
		}
		if again, err := cleanFilePath("/elsewhere", c); err != nil || again != c {
			t.Fatalf("%q -> %q is not stable: %q %v", p, c, again, err)
		}
		dir, base := splitFilePath(c)
		if c == "/" {
			if dir != "/" || base != "" {
				t.Fatalf("split /: %q %q", dir, base)
			}
		} else if base == "" || strings.Contains(base, "/") || path.Join(dir, base) != c {
			t.Fatalf("split %q: %q %q", c, dir, base)
		}
	})
}

const testPasswd = `root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
sandbox:x:1000:1000:Sandbox:/home/sandbox:/bin/sh
# comment:x:5:5
broken line
bad:x:notanumber:1::/:
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
`

const testGroup = `root:x:0:
wheel:x:10:root,sandbox
sandbox:x:1000:
docker:x:999:sandbox,other
nogroup:x:65534:
`

func TestResolveUser(t *testing.T) {
	for _, c := range []struct {
		spec   string
		want   *fsIdentity
		errSub string
	}{
		{spec: "", want: nil},
		{spec: "root", want: nil},
		{spec: "0", want: nil},
		{spec: "0:0", want: nil},
		{spec: "sandbox", want: &fsIdentity{1000, 1000, []uint32{1000, 10, 999}}},
		{spec: "1000", want: &fsIdentity{1000, 1000, []uint32{1000, 10, 999}}},
		{spec: "sandbox:nogroup", want: &fsIdentity{1000, 65534, []uint32{65534}}},
		{spec: "nobody", want: &fsIdentity{65534, 65534, []uint32{65534}}},
		{spec: "4242", want: &fsIdentity{4242, 0, []uint32{0}}}, // docker's rule: no entry, group 0
		{spec: "4242:4343", want: &fsIdentity{4242, 4343, []uint32{4343}}},
		{spec: "0:1000", want: &fsIdentity{0, 1000, []uint32{1000}}},
		{spec: "ghost", errSub: `no user "ghost"`},
		{spec: "sandbox:ghosts", errSub: `no group "ghosts"`},
		{spec: "bad", errSub: `no user "bad"`},
		{spec: "a:b:c", errSub: "is not NAME"},
		{spec: ":1", errSub: "is not NAME"},
		{spec: "1:", errSub: "is not NAME"},
		{spec: "-1", errSub: "is not NAME"},
		{spec: "4294967295", errSub: `no user "4294967295"`},
		{spec: "us er", errSub: "is not NAME"},
		{spec: strings.Repeat("u", 300), errSub: "at most"},
	} {
		got, err := fsResolveUser(c.spec, []byte(testPasswd), []byte(testGroup))
		if c.errSub != "" {
			if err == nil || !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), c.errSub) {
				t.Errorf("%q: %v, want error with %q", c.spec, err, c.errSub)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		if (got == nil) != (c.want == nil) || (got != nil && (got.uid != c.want.uid || got.gid != c.want.gid || !slices.Equal(got.groups, c.want.groups))) {
			t.Errorf("%q: %+v, want %+v", c.spec, got, c.want)
		}
	}
}

// FuzzResolveUser: the sandbox writes /etc/passwd and /etc/group, so their
// content is hostile. Resolution never panics, never yields id -1, and
// keeps the group list bounded.
func FuzzResolveUser(f *testing.F) {
	f.Add("sandbox", testPasswd, testGroup)
	f.Add("1000:wheel", testPasswd, testGroup)
	f.Add("x", "x:x:1:2\n", "g:x:3:x,x,x\n")
	f.Add("a", "a:x:4294967295:1\n", "")
	f.Add("0", "", "")
	f.Fuzz(func(t *testing.T, spec, passwd, group string) {
		id, err := fsResolveUser(spec, []byte(passwd), []byte(group))
		if err != nil {
			if !errors.Is(err, wire.ErrInvalid) {
				t.Fatalf("%q: error %v is not invalid-argument", spec, err)
			}
			return
		}
		if id == nil {
			return
		}
		if id.uid == 1<<32-1 || id.gid == 1<<32-1 {
			t.Fatalf("%q: id -1: %+v", spec, id)
		}
		if len(id.groups) == 0 || id.groups[0] != id.gid || len(id.groups) > fsMaxGroups {
			t.Fatalf("%q: groups %v for gid %d", spec, id.groups, id.gid)
		}
	})
}
