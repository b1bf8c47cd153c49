package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Ops lists every Op constant of this package (the control requests,
// Ctl*, are not operations), each once, and the wire names never change:
// a boxd drives the inits of sandboxes an older boxd created.
func TestOpsListsEveryOp(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Op") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					declared[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
			return true
		})
	}
	var want []string
	for _, v := range declared {
		want = append(want, v)
	}
	got := append(slices.Clone(Ops), Retired...)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("Ops = %v, want the declared ops %v", got, want)
	}
	// The names older inits know; a rename would strand their sandboxes.
	for _, name := range []string{"ping", "exec", "stat", "copy-in", "copy-out", "process-exec", "process-start",
		"process-attach", "process-list", "process-wait", "process-signal", "session-create", "session-list",
		"session-remove", "session-exec", "file-write", "file-read", "file-stat", "file-list", "file-mkdir",
		"file-remove", "file-rename", "file-chmod", "file-upload", "file-download", "file-watch"} {
		if !slices.Contains(Ops, name) && !slices.Contains(Retired, name) {
			t.Errorf("op %q is gone from the wire", name)
		}
	}
}
