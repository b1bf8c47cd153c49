//go:build linux

package rpc

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/security.md's table of request fields from requestRules")

// requestMessage is a message a request carries: a call's input, or a
// message in one of its fields (where says which).
type requestMessage struct {
	md    protoreflect.MessageDescriptor
	calls []string // Service.Method taking it as input
	where []string // Message.field carrying it
}

// requestMessages walks every service of the API in the proto registry:
// each call's input message and, depth first, the messages its fields
// carry (map values too), each once, in that order.
func requestMessages() []*requestMessage {
	var out []*requestMessage
	seen := map[protoreflect.FullName]*requestMessage{}
	var walk func(md protoreflect.MessageDescriptor) *requestMessage
	walk = func(md protoreflect.MessageDescriptor) *requestMessage {
		if r := seen[md.FullName()]; r != nil {
			return r
		}
		r := &requestMessage{md: md}
		seen[md.FullName()] = r
		out = append(out, r)
		fs := md.Fields()
		for i := 0; i < fs.Len(); i++ {
			f := fs.Get(i)
			var sub protoreflect.MessageDescriptor
			switch {
			case f.IsMap():
				if f.MapValue().Kind() == protoreflect.MessageKind {
					sub = f.MapValue().Message()
				}
			case f.Kind() == protoreflect.MessageKind:
				sub = f.Message()
			}
			if sub != nil {
				s := walk(sub)
				s.where = append(s.where, string(md.Name())+"."+string(f.Name()))
			}
		}
		return r
	}
	for _, fd := range apiFiles() {
		for i := 0; i < fd.Services().Len(); i++ {
			sv := fd.Services().Get(i)
			for j := 0; j < sv.Methods().Len(); j++ {
				m := sv.Methods().Get(j)
				r := walk(m.Input())
				r.calls = append(r.calls, string(sv.Name())+"."+string(m.Name()))
			}
		}
	}
	return out
}

// TestRequestRulesCover: every field of every request message in the
// proto registry has exactly one rule in requestRules, the table names
// no field or message that does not exist, and a call is admins' only
// exactly when every field of its request is.
func TestRequestRulesCover(t *testing.T) {
	msgs := requestMessages()
	if len(msgs) < 50 {
		t.Fatalf("walked only %d request messages: is the API's registry empty?", len(msgs))
	}
	reached := map[protoreflect.Name]bool{}
	for _, rm := range msgs {
		md := rm.md
		reached[md.Name()] = true
		r, ok := requestRules[md.Name()]
		if !ok || md.ParentFile().Package() != "boxd.v1" {
			t.Errorf("%s (%s%s): not in requestRules; give each of its fields a rule", md.FullName(), strings.Join(rm.calls, ", "), strings.Join(rm.where, ", "))
			continue
		}
		count := map[protoreflect.Name]int{}
		for _, f := range fieldList(r.anyone) {
			count[f]++
		}
		for _, f := range fieldList(r.admin) {
			count[f]++
		}
		for f := range r.cond {
			count[f]++
		}
		fs := md.Fields()
		for i := 0; i < fs.Len(); i++ {
			name := fs.Get(i).Name()
			if count[name] != 1 {
				t.Errorf("%s.%s has %d rules in requestRules, want exactly one (any, admin or a conditional)", md.Name(), name, count[name])
			}
		}
		for f := range count {
			if fs.ByName(f) == nil {
				t.Errorf("requestRules names %s.%s, which the message does not have", md.Name(), f)
			}
		}
		if len(rm.calls) > 0 && (r.adminCall != "") != allAdmin(md) {
			t.Errorf("%s: adminCall %q, but every field admin-only is %v: a call is admins' only exactly when all its request's fields are", md.Name(), r.adminCall, allAdmin(md))
		}
	}
	for name := range requestRules {
		if !reached[name] {
			t.Errorf("requestRules has %s, which no request carries", name)
		}
	}
}

const (
	docBegin = "<!-- request-rules begin: rendered from rpc/fieldrules.go by `go test ./rpc -run TestRequestRulesDoc -update` -->\n"
	docEnd   = "<!-- request-rules end -->\n"
)

// renderRules is the docs' table of requestRules.
func renderRules() string {
	var b strings.Builder
	b.WriteString(docBegin)
	b.WriteString("| request | carried by | anyone | admins only | conditional |\n| --- | --- | --- | --- | --- |\n")
	code := func(names []string) string {
		for i, n := range names {
			names[i] = "`" + n + "`"
		}
		return strings.Join(names, ", ")
	}
	var conds []string
	for _, rm := range requestMessages() {
		md := rm.md
		r := requestRules[md.Name()]
		by := code(append(slices.Clone(rm.calls), rm.where...))
		if r.adminCall != "" {
			by += " (admins only: " + r.adminCall + ")"
		}
		var anyone, admin, cond []string
		fs := md.Fields()
		for i := 0; i < fs.Len(); i++ {
			name := fs.Get(i).Name()
			switch rule, c := ruleOf(md, name); {
			case c != nil:
				cond = append(cond, fmt.Sprintf("`%s` (%s)", name, c.name))
				conds = append(conds, fmt.Sprintf("- **%s** (`%s.%s`): %s\n", c.name, md.Name(), name, c.doc))
			case rule == "any":
				anyone = append(anyone, string(name))
			default:
				admin = append(admin, string(name))
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", md.Name(), by, code(anyone), code(admin), strings.Join(cond, ", "))
	}
	b.WriteString("\nConditional rules:\n\n")
	for _, c := range conds {
		b.WriteString(c)
	}
	b.WriteString(docEnd)
	return b.String()
}

// TestRequestRulesDoc: docs/security.md's table of request fields is the
// one rendered from requestRules (-update rewrites it).
func TestRequestRulesDoc(t *testing.T) {
	const path = "../docs/security.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, docBegin), strings.Index(s, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no request-rules section (the lines %q and %q)", path, strings.TrimSpace(docBegin), strings.TrimSpace(docEnd))
	}
	got, want := s[i:j+len(docEnd)], renderRules()
	if got == want {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(s[:i]+want+s[j+len(docEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's table of request fields differs from requestRules: run go test ./rpc -run TestRequestRulesDoc -update\n--- doc\n%s\n--- table\n%s", path, got, want)
}

func callerCtx(admin bool) context.Context {
	ctx := context.WithValue(context.Background(), peerKey{}, Peer{UID: 1000, PID: 1})
	return runtime.WithCaller(ctx, runtime.Caller{UID: 1000, Admin: admin})
}

// TestGateFieldRules: the gate refuses a non-admin's request by the
// field's rule, naming the field, and lets admins and plain requests by.
func TestGateFieldRules(t *testing.T) {
	g := newGate(&Server{DefaultImage: "example.org/default:v1"})
	const create = "/boxd.v1.SandboxService/CreateSandbox"
	for _, tc := range []struct {
		proc    string
		m       proto.Message
		refused string // the field named, or "" if let by
	}{
		{create, &boxdv1.CreateSandboxRequest{Image: "example.org/team/app:v1"}, ""},
		{create, &boxdv1.CreateSandboxRequest{Image: "example.org/team/app:v1", Pull: "never"}, ""},
		{create, &boxdv1.CreateSandboxRequest{Image: "example.org/team/app:v1", Pull: "always"}, "pull"},
		// No image store here: every image is absent.
		{create, &boxdv1.CreateSandboxRequest{Image: "example.org/team/app:v1", Pull: "missing"}, "pull"},
		{create, &boxdv1.CreateSandboxRequest{Pull: "always"}, "pull"},
		{create, &boxdv1.CreateSandboxRequest{Pull: "sometimes"}, ""}, // the call's invalid_argument
		{"/boxd.v1.SandboxService/ListSandboxes", &boxdv1.ListSandboxesRequest{All: true}, "all"},
		{"/boxd.v1.SandboxService/ListSandboxes", &boxdv1.ListSandboxesRequest{Owner: "0"}, "owner"},
		{"/boxd.v1.SandboxService/ListSandboxes", &boxdv1.ListSandboxesRequest{Owner: "1000"}, ""},
		{"/boxd.v1.SandboxService/Exec", &boxdv1.ExecRequest{SandboxId: "x", Args: []string{"true"}}, ""},
	} {
		pr := procRules[tc.proc]
		for _, admin := range []bool{false, true} {
			ctx := callerCtx(admin)
			err := g.admitRule(ctx, tc.proc, pr)
			if err == nil {
				err = g.checkFields(ctx, pr, tc.m)
				g.done()
			}
			switch {
			case admin || tc.refused == "":
				if err != nil {
					t.Errorf("%s %v (admin %v): %v, want it let by", tc.proc, tc.m, admin, err)
				}
			case connect.CodeOf(err) != connect.CodePermissionDenied || !strings.HasPrefix(err.(*connect.Error).Message(), tc.refused+": "):
				t.Errorf("%s %v by a non-admin: %v, want permission_denied naming %s", tc.proc, tc.m, err, tc.refused)
			}
		}
	}
	// The calls of admins only are refused before any message.
	for _, proc := range []string{"/boxd.v1.SandboxService/ImportImage", "/boxd.v1.SandboxService/CommitSandbox",
		"/boxd.v1.SandboxService/BuildImage", "/boxd.v1.SandboxService/RemoveImage", "/boxd.v1.SandboxService/TagImage",
		"/boxd.v1.RegistryService/PullImage",
		"/boxd.v1.RegistryService/PushImage", "/boxd.v1.PoolService/SetPoolSize"} {
		if err := g.admit(callerCtx(false), proc); connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "--admin-group") {
			t.Errorf("%s by a non-admin: %v, want permission_denied", proc, err)
		}
		if err := g.admit(callerCtx(true), proc); err != nil {
			t.Errorf("%s by an admin: %v", proc, err)
		} else {
			g.done()
		}
	}
	// The exec calls pay nothing but the lookup that misses.
	for _, proc := range []string{"/boxd.v1.SandboxService/Exec", "/boxd.v1.SandboxService/ExecStream", "/boxd.v1.ProcessService/Exec", "/boxd.v1.ProcessService/Start"} {
		if pr := procRules[proc]; pr != nil {
			t.Errorf("%s has a rule %+v: its requests would be checked field by field", proc, pr)
		}
	}
}

// BenchmarkGateAdmitExec is the gate's cost on an exec.
func BenchmarkGateAdmitExec(b *testing.B) {
	g := newGate(&Server{})
	ctx := callerCtx(false)
	for b.Loop() {
		if err := g.admit(ctx, "/boxd.v1.SandboxService/Exec"); err != nil {
			b.Fatal(err)
		}
		g.done()
	}
}

// oneMessageConn is a stream whose one request message is msg.
type oneMessageConn struct {
	connect.StreamingHandlerConn
	proc string
	msg  proto.Message
}

func (c *oneMessageConn) Spec() connect.Spec { return connect.Spec{Procedure: c.proc} }

func (c *oneMessageConn) Receive(m any) error {
	proto.Merge(m.(proto.Message), c.msg)
	return nil
}

// TestGateFieldRulesStream: a stream's request messages are checked as
// the handler receives them.
func TestGateFieldRulesStream(t *testing.T) {
	const proc = "/boxd.v1.Test/Stream"
	procRules[proc] = &procRule{check: compileCheck((&boxdv1.CreateSandboxRequest{}).ProtoReflect().Descriptor(), map[protoreflect.FullName]*msgCheck{})}
	defer delete(procRules, proc)
	g := newGate(&Server{})
	h := g.WrapStreamingHandler(func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return conn.Receive(&boxdv1.CreateSandboxRequest{})
	})
	for _, tc := range []struct {
		admin bool
		msg   *boxdv1.CreateSandboxRequest
		code  connect.Code
	}{
		{false, &boxdv1.CreateSandboxRequest{Pull: "always"}, connect.CodePermissionDenied},
		{false, &boxdv1.CreateSandboxRequest{Pull: "never"}, 0},
		{true, &boxdv1.CreateSandboxRequest{Pull: "always"}, 0},
	} {
		err := h(callerCtx(tc.admin), &oneMessageConn{proc: proc, msg: tc.msg})
		if connect.CodeOf(err) != tc.code && !(tc.code == 0 && err == nil) {
			t.Errorf("stream of %v (admin %v): %v, want code %v", tc.msg, tc.admin, err, tc.code)
		}
	}
}
