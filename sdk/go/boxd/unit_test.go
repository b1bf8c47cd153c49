package boxd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestErrorsIs: an error from boxd matches the Err* value of its code and
// no other, keeps boxd's message, and still unwraps to connect's error.
func TestErrorsIs(t *testing.T) {
	for code, sentinel := range byCode {
		err := wrap(connect.NewError(code, errors.New("sandbox x not found")))
		if !errors.Is(err, sentinel) {
			t.Errorf("%v: not errors.Is %v", code, sentinel)
		}
		for other, s := range byCode {
			if other != code && errors.Is(err, s) {
				t.Errorf("%v: errors.Is %v too", code, s)
			}
		}
		if want := code.String() + ": sandbox x not found"; err.Error() != want {
			t.Errorf("%v: %q, want %q", code, err, want)
		}
		if connect.CodeOf(err) != code {
			t.Errorf("%v: connect.CodeOf %v", code, connect.CodeOf(err))
		}
	}
	canceled := wrap(connect.NewError(connect.CodeCanceled, context.Canceled))
	if !errors.Is(canceled, context.Canceled) || !errors.Is(canceled, ErrCanceled) {
		t.Errorf("a canceled call: %v is not both context.Canceled and ErrCanceled", canceled)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Connect(ctx, WithSocket(filepath.Join(t.TempDir(), "none.sock")))
	if !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Errorf("connect with a canceled context: %v, want ErrCanceled and context.Canceled", err)
	}
	if wrap(nil) != nil {
		t.Error("wrap(nil) is not nil")
	}
}

// TestSocketChoice: options win over the environment, a socket over an
// instance, and an instance's socket is where boxd --instance puts it.
func TestSocketChoice(t *testing.T) {
	for _, tc := range []struct {
		opts           []Option
		socketEnv, env string
		want           string
	}{
		{nil, "", "", DefaultSocket},
		{nil, "", "default", DefaultSocket},
		{nil, "", "ci", "/run/boxd-ci/boxd.sock"},
		{nil, "/e.sock", "ci", "/e.sock"},
		{[]Option{WithInstance("b2")}, "/e.sock", "ci", "/run/boxd-b2/boxd.sock"},
		{[]Option{WithSocket("/o.sock"), WithInstance("b2")}, "/e.sock", "", "/o.sock"},
	} {
		t.Setenv(SocketEnv, tc.socketEnv)
		t.Setenv(InstanceEnv, tc.env)
		var s settings
		for _, o := range tc.opts {
			o(&s)
		}
		if got, err := socketOf(s); err != nil || got != tc.want {
			t.Errorf("%+v BOXD_SOCKET=%q BOXD_INSTANCE=%q: %q %v, want %q", s, tc.socketEnv, tc.env, got, err, tc.want)
		}
	}
	for _, bad := range []string{"-x", "Big", "a/b", "../x", "elevenchars"} {
		if _, err := Connect(context.Background(), WithInstance(bad)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("instance %q: %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// createOptions is sdk/create-options.json's Go column: each
// CreateSandboxRequest field path and the Options field that sets it.
func createOptions(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../create-options.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Fields map[string]map[string]string `json:"fields"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for path, names := range f.Fields {
		out[path] = names["go"]
	}
	return out
}

// sample is a non-zero value for an Options field of type typ.
func sample(typ reflect.Type) reflect.Value {
	v := reflect.New(typ).Elem()
	switch typ {
	case reflect.TypeFor[time.Duration]():
		v.SetInt(int64(7 * time.Minute))
		return v
	case reflect.TypeFor[*RegistryAuth]():
		return reflect.ValueOf(&RegistryAuth{Username: "u", Password: "p", IdentityToken: "t"})
	case reflect.TypeFor[[]Port]():
		return reflect.ValueOf([]Port{{HostIP: "127.0.0.1", HostPort: 1, Port: 2, Protocol: "tcp"}})
	}
	switch typ.Kind() {
	case reflect.String:
		v.SetString("7m")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int64, reflect.Int:
		v.SetInt(7)
	case reflect.Uint64, reflect.Uint32:
		v.SetUint(7)
	case reflect.Float64:
		v.SetFloat(7)
	case reflect.Slice:
		v = reflect.ValueOf([]string{"a=b"})
	case reflect.Map:
		v = reflect.ValueOf(map[string]string{"k": "v"})
	}
	return v
}

// TestOptionsSetEveryField: each Options field that sdk/create-options.json
// names for a CreateSandboxRequest field sets that field (the file's other
// columns and the proto side are checked by mcpserver's
// TestCreateOptionsReachable).
func TestOptionsSetEveryField(t *testing.T) {
	for path, name := range createOptions(t) {
		if name == "" {
			t.Errorf("%s: no go entry in sdk/create-options.json", path)
			continue
		}
		if strings.HasPrefix(name, "excluded:") {
			continue
		}
		top, _, _ := strings.Cut(name, ".")
		fv := reflect.ValueOf(&Options{}).Elem().FieldByName(top)
		if !fv.IsValid() {
			t.Errorf("%s: Options has no field %s", path, top)
			continue
		}
		var o Options
		reflect.ValueOf(&o).Elem().FieldByName(top).Set(sample(fv.Type()))
		req, err := o.request()
		if err != nil {
			t.Fatalf("%s=%v: %v", top, o, err)
		}
		if !isSet(req.ProtoReflect(), strings.Split(path, ".")) {
			t.Errorf("Options.%s leaves %s unset", top, path)
		}
	}
	if req, _ := (Options{Allow: []string{"api.example.com:443"}}).request(); req.GetNetwork().GetMode() != "egress" {
		t.Errorf("Allow alone: network %v, want egress", req.GetNetwork())
	}
	if req, _ := (Options{}).request(); req.Limits != nil || req.Network != nil || req.Ttl != "" {
		t.Errorf("zero Options: %v, want the daemon's defaults", req)
	}
	if req, _ := (Options{TTL: Never}).request(); req.Ttl != "0" {
		t.Errorf("TTL Never: ttl %q, want \"0\"", req.Ttl)
	}
	if _, err := (Options{IdleTimeout: -time.Second}).request(); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "IdleTimeout") {
		t.Errorf("a negative IdleTimeout: %v, want invalid_argument naming it", err)
	}
}

func isSet(m protoreflect.Message, path []string) bool {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(path[0]))
	if fd == nil || !m.Has(fd) {
		return false
	}
	if len(path) == 1 {
		return true
	}
	v := m.Get(fd)
	if fd.IsList() {
		return isSet(v.List().Get(0).Message(), path[1:])
	}
	return isSet(v.Message(), path[1:])
}

// goCmd runs the go command in dir, offline (every module the SDK needs
// is in the module cache of whoever built this repository).
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// TestNoDaemonDependencies: the SDK's module graph, and that of a program
// in another module that imports it (sdk/go/README.md's example, with the
// replace lines the README gives), has no containerd (or anything else of
// the daemon's): connect, protobuf and boxd's API modules; and the example
// runs as the README says.
func TestNoDaemonDependencies(t *testing.T) {
	if out := goCmd(t, ".", "list", "-m", "all"); strings.Contains(out, "containerd") {
		t.Errorf("the SDK's module graph has containerd:\n%s", out)
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	user := t.TempDir()
	gomod := fmt.Sprintf(`module example.com/sandboxer

go 1.26.0

require github.com/boxd-dev/boxd/sdk/go/boxd v0.0.0-00010101000000-000000000000

replace (
	github.com/boxd-dev/boxd/sdk/go/boxd => %[1]s/sdk/go/boxd
	github.com/boxd-dev/boxd/rpc/apiwire => %[1]s/rpc/apiwire
	github.com/boxd-dev/boxd/rpc/gen => %[1]s/rpc/gen
)
`, root)
	// The program is the README's example, as a user would paste it.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, main, ok := strings.Cut(string(readme), "```go\n")
	main, _, _ = strings.Cut(main, "```")
	if !ok || !strings.Contains(main, "boxd.Connect") {
		t.Fatalf("sdk/go/README.md has no Go example using boxd.Connect")
	}
	// The SDK's go.sum holds the sum of every module the program needs, so
	// tidy looks nothing up.
	sums, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"go.mod": gomod, "main.go": main, "go.sum": string(sums)} {
		if err := os.WriteFile(filepath.Join(user, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd(t, user, "mod", "tidy")
	exe := filepath.Join(user, "sandboxer")
	goCmd(t, user, "build", "-o", exe, ".")
	out := goCmd(t, user, "list", "-m", "all")
	for _, bad := range []string{"containerd", "github.com/boxd-dev/boxd =>", "opencontainers", "grpc "} {
		if strings.Contains(out, bad) {
			t.Errorf("a program importing the SDK has %q in its module graph:\n%s", bad, out)
		}
	}
	t.Logf("a program importing the SDK:\n%s", out)

	// And the example does what the README says, against the test boxd.
	if os.Getenv(SocketEnv) == "" {
		t.Fatalf("%s is unset: the README's example needs a boxd (e2e TestSDKGo runs this against a private one)", SocketEnv)
	}
	run, err := exec.Command(exe).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(run), "hi from ") || !strings.HasSuffix(string(run), "0\n") {
		t.Errorf("the README's example: %v\n%s\nwant \"hi from HOSTNAME\" and exit code 0", err, run)
	}
}

// TestHostChoice: a host needs https:// (or http://) and a token; both
// come from options or the environment, and a bad one fails before any
// connection.
func TestHostChoice(t *testing.T) {
	t.Setenv("BOXD_HOST", "")
	t.Setenv("BOXD_TOKEN", "")
	ctx := context.Background()
	for _, opts := range [][]Option{
		{WithHost("sandboxes:7443"), WithToken("boxd_x")},
		{WithHost("ftp://h:1"), WithToken("boxd_x")},
		{WithHost("https://h:1/path"), WithToken("boxd_x")},
		{WithHost("https://h:1")},
		{WithHost("https://h:1"), WithToken("boxd_x"), WithTLSCA("/nonexistent.pem")},
	} {
		if _, err := Connect(ctx, opts...); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%d options: %v, want invalid_argument", len(opts), err)
		}
	}
	t.Setenv("BOXD_HOST", "https://h:1")
	if _, err := Connect(ctx); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "token") {
		t.Errorf("BOXD_HOST without a token: %v", err)
	}
	// A host wins over a socket: an unreachable host is unavailable
	// naming it, not a call on the local socket.
	t.Setenv("BOXD_TOKEN", "boxd_x")
	_, err := Connect(ctx, WithHost("http://127.0.0.1:1"), WithSocket("/nonexistent.sock"))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("unreachable host: %v", err)
	}
}
