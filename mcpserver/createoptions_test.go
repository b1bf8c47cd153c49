package mcpserver

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// optionsFile maps every CreateSandboxRequest field to the option that
// sets it in each client, or "excluded: REASON".
const optionsFile = "../sdk/create-options.json"

var clients = []string{"python", "typescript", "mcp", "go"}

func loadOptions(t *testing.T) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(optionsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Fields map[string]map[string]string `json:"fields"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", optionsFile, err)
	}
	return f.Fields
}

// protoPaths are the leaf field paths of md: a message field (not a map)
// contributes its own fields as PARENT.FIELD.
func protoPaths(md protoreflect.MessageDescriptor, prefix string) []string {
	var out []string
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		path := prefix + string(fd.Name())
		if fd.Message() != nil && !fd.IsMap() {
			out = append(out, protoPaths(fd.Message(), path+".")...)
			continue
		}
		out = append(out, path)
	}
	return out
}

// TestCreateOptionsReachable: every field of CreateSandboxRequest is in
// sdk/create-options.json, each with an option in the Python SDK, the
// TypeScript SDK and the MCP tool sandbox_create, or a stated reason for
// leaving it out; and each named option exists in that client's source
// (Python's Sandbox.create and aio.Sandbox.create keywords, TypeScript's
// CreateOptions, the MCP tool's input schema, the Go SDK's boxd.Options).
func TestCreateOptionsReachable(t *testing.T) {
	opts := loadOptions(t)
	paths := protoPaths((&boxdv1.CreateSandboxRequest{}).ProtoReflect().Descriptor(), "")
	for _, p := range paths {
		if _, ok := opts[p]; !ok {
			t.Errorf("%s: CreateSandboxRequest.%s is not in the file: give it an option in each client, or \"excluded: REASON\"", optionsFile, p)
		}
	}
	have := map[string]func(opt, key string) bool{
		"python":     pythonHas(t),
		"typescript": typescriptHas(t),
		"mcp":        mcpHas(t),
		"go":         goHas(t),
	}
	for path, names := range opts {
		if !slices.Contains(paths, path) {
			t.Errorf("%s: %s is no field of CreateSandboxRequest", optionsFile, path)
		}
		for _, c := range clients {
			name, ok := names[c]
			switch {
			case !ok || name == "":
				t.Errorf("%s: %s has no entry for %s", optionsFile, path, c)
			case strings.HasPrefix(name, "excluded:"):
				if len(strings.TrimSpace(strings.TrimPrefix(name, "excluded:"))) < 10 {
					t.Errorf("%s: %s is excluded from %s without a reason", optionsFile, path, c)
				}
			default:
				opt, key, _ := strings.Cut(name, ".")
				if !have[c](opt, key) {
					t.Errorf("%s: %s names %s option %q, which %s does not have", optionsFile, path, c, name, c)
				}
			}
		}
	}
}

// TestMCPCreateExcludes: the MCP tool has none of the options the file
// excludes for it, and registry credentials are among them.
func TestMCPCreateExcludes(t *testing.T) {
	opts := loadOptions(t)
	for _, p := range []string{"registry_auth.username", "registry_auth.password", "registry_auth.identity_token"} {
		if !strings.HasPrefix(opts[p]["mcp"], "excluded:") {
			t.Errorf("%s reaches MCP as %q: an LLM must not hold registry credentials", p, opts[p]["mcp"])
		}
	}
	props := mcpCreateProps(t)
	for _, forbidden := range []string{"auth", "registry_auth", "username", "password", "identity_token", "replace"} {
		if _, ok := props[forbidden]; ok {
			t.Errorf("sandbox_create takes %s", forbidden)
		}
	}
}

// block is the text of file from the line starting with start to the
// first end after it.
func block(t *testing.T, file, start, end string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, start)
	if i < 0 {
		t.Fatalf("%s: no %q", file, start)
	}
	j := strings.Index(s[i:], end)
	if j < 0 {
		t.Fatalf("%s: no %q after %q", file, end, start)
	}
	return s[i : i+j]
}

func names(re *regexp.Regexp, text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

// pythonHas: opt is a keyword of both Sandbox.create signatures; key, a
// field of PublishedPort (publish) or a key _auth takes (auth).
func pythonHas(t *testing.T) func(opt, key string) bool {
	param := regexp.MustCompile(`[(,]\s*(\w+)\s*:`)
	sync := names(param, block(t, "../sdk/python/boxd/sandbox.py", "    def create(cls,", `) -> "Sandbox":`))
	async := names(param, block(t, "../sdk/python/boxd/aio.py", "    def create(cls,", `) -> _Creating:`))
	subs := map[string]map[string]bool{
		"publish": names(regexp.MustCompile(`(?m)^    (\w+): `), block(t, "../sdk/python/boxd/types.py", "class PublishedPort:", "@classmethod")),
		"auth":    names(regexp.MustCompile(`"(\w+)"`), block(t, "../sdk/python/boxd/sandbox.py", "def _auth(", "return boxd_pb2.RegistryAuth")),
	}
	if len(sync) < 10 || len(async) < 10 {
		t.Fatalf("found too few Python create keywords: %v %v", sync, async)
	}
	return func(opt, key string) bool {
		return sync[opt] && async[opt] && (key == "" || subs[opt][key])
	}
}

// typescriptHas: opt is a property of CreateOptions; key, of
// PublishedPort (publish) or RegistryAuth (auth).
func typescriptHas(t *testing.T) func(opt, key string) bool {
	prop := regexp.MustCompile(`(?m)^  (\w+)\??: `)
	top := names(prop, block(t, "../sdk/typescript/src/sandbox.ts", "export interface CreateOptions ", "\n}"))
	subs := map[string]map[string]bool{
		"publish": names(prop, block(t, "../sdk/typescript/src/types.ts", "export interface PublishedPort ", "\n}")),
		"auth":    names(prop, block(t, "../sdk/typescript/src/sandbox.ts", "export interface RegistryAuth ", "\n}")),
	}
	if len(top) < 10 {
		t.Fatalf("found too few TypeScript CreateOptions: %v", top)
	}
	return func(opt, key string) bool {
		return top[opt] && (key == "" || subs[opt][key])
	}
}

// goHas: opt is a field of the Go SDK's boxd.Options; key, a field of the
// struct its elements (or what it points to) are, declared in the same
// file.
func goHas(t *testing.T) func(opt, key string) bool {
	const file = "../sdk/go/boxd/options.go"
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	structs := map[string]map[string]string{} // type name -> field -> its element's type name
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		fields := map[string]string{}
		for _, fl := range st.Fields.List {
			elem := fl.Type
			switch e := elem.(type) {
			case *ast.ArrayType:
				elem = e.Elt
			case *ast.StarExpr:
				elem = e.X
			}
			id, _ := elem.(*ast.Ident)
			for _, name := range fl.Names {
				fields[name.Name] = id.String()
			}
		}
		structs[ts.Name.Name] = fields
		return false
	})
	if len(structs["Options"]) < 10 {
		t.Fatalf("found too few fields of boxd.Options in %s: %v", file, structs["Options"])
	}
	return func(opt, key string) bool {
		elem, ok := structs["Options"][opt]
		if !ok || key == "" {
			return ok
		}
		_, ok = structs[elem][key]
		return ok
	}
}

// mcpCreateProps are the properties of sandbox_create's input schema, as
// an MCP client lists them.
func mcpCreateProps(t *testing.T) map[string]any {
	t.Helper()
	tools, err := inMemoryClient(t, false).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "sandbox_create" {
			schema, _ := tool.InputSchema.(map[string]any)
			props, _ := schema["properties"].(map[string]any)
			return props
		}
	}
	t.Fatal("no sandbox_create tool")
	return nil
}

// mcpHas: opt is a property of sandbox_create's input; key, a property of
// its items.
func mcpHas(t *testing.T) func(opt, key string) bool {
	props := mcpCreateProps(t)
	return func(opt, key string) bool {
		p, ok := props[opt].(map[string]any)
		if !ok || key == "" {
			return ok
		}
		items, _ := p["items"].(map[string]any)
		sub, _ := items["properties"].(map[string]any)
		_, ok = sub[key]
		return ok
	}
}

// TestMCPCreateRequest: each sandbox_create option the file names sets
// the CreateSandboxRequest field it names; an allowlist alone means an
// egress network; this server's own labels cannot be set.
func TestMCPCreateRequest(t *testing.T) {
	s := &Server{session: "sess"}
	props := mcpCreateProps(t)
	for path, names := range loadOptions(t) {
		name := names["mcp"]
		if strings.HasPrefix(name, "excluded:") {
			continue
		}
		opt, key, _ := strings.Cut(name, ".")
		args := map[string]any{opt: sampleFor(props[opt])}
		if key != "" {
			item := props[opt].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)
			args[opt] = []any{map[string]any{key: sampleFor(item[key])}}
		}
		req := mcpRequest(t, s, args)
		if !isSet(req.ProtoReflect(), strings.Split(path, ".")) {
			t.Errorf("sandbox_create %s=%v leaves %s unset", opt, args[opt], path)
		}
	}
	req := mcpRequest(t, s, map[string]any{"allow": []any{"api.example.com:443"}})
	if n := req.GetNetwork(); n.GetMode() != "egress" || !slices.Equal(n.GetAllow(), []string{"api.example.com:443"}) {
		t.Errorf("allow alone: network %v, want egress with the allowlist", n)
	}
	if req := mcpRequest(t, s, map[string]any{"network": "none"}); req.GetNetwork().GetMode() != "none" {
		t.Errorf("network none: %v", req.GetNetwork())
	}
	if req := mcpRequest(t, s, map[string]any{}); req.Network != nil || req.Limits != nil || req.GetLabels()[SessionLabel] != "sess" {
		t.Errorf("no options: %v", req)
	}
	for _, k := range []string{SessionLabel, KeepLabel} {
		var in createIn
		in.Labels = map[string]string{k: "x"}
		if _, err := s.createRequest(in); err == nil || !strings.Contains(err.Error(), "labels") {
			t.Errorf("label %s: err %v, want one naming labels", k, err)
		}
	}
}

func mcpRequest(t *testing.T, s *Server, args map[string]any) *boxdv1.CreateSandboxRequest {
	t.Helper()
	b, _ := json.Marshal(args)
	var in createIn
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	req, err := s.createRequest(in)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return req
}

// sampleFor is a value of a schema property's type that is not its zero.
func sampleFor(p any) any {
	schema, _ := p.(map[string]any)
	typ := schema["type"]
	if types, ok := typ.([]any); ok { // ["null", "array"] of a slice
		for _, x := range types {
			if x != "null" {
				typ = x
			}
		}
	}
	switch typ {
	case "string":
		return "7m"
	case "integer", "number":
		return 7
	case "boolean":
		return true
	case "array":
		return []any{"a=b"}
	case "object":
		return map[string]any{"k": "v"}
	}
	return nil
}

// isSet: the field at path (into repeated messages: their first) has a
// non-zero value.
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
