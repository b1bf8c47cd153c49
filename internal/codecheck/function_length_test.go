package codecheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFuncLines is the longest a hand-written, non-test function may be,
// counted from its func keyword to its closing brace.
const maxFuncLines = 100

// checkedDirs are the trees, relative to the repository root, whose
// functions are measured.
var checkedDirs = []string{"cmd/boxd", "runtime", "rpc", "network", "agent", "snapshot"}

// longFuncs returns every function over maxFuncLines in the checked trees,
// as "path:Name" (methods "path:Recv.Name") mapped to its length.
func longFuncs(t *testing.T, root string) map[string]int {
	t.Helper()
	long := map[string]int{}
	for _, dir := range checkedDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			return measure(root, path, long)
		})
		if err != nil {
			t.Fatalf("walk %s: %v", dir, err)
		}
	}
	return long
}

// measure adds path's long functions to long, unless path is generated.
func measure(root, path string, long map[string]int) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return err
	}
	if ast.IsGenerated(f) {
		return nil
	}
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return err
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
		if n > maxFuncLines {
			long[filepath.ToSlash(rel)+":"+funcName(fn)] = n
		}
	}
	return nil
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok { // generic receiver
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fmt.Sprintf("%T.%s", t, fn.Name.Name)
}

// TestFunctionLength fails on any hand-written function over
// maxFuncLines lines: past a screen a reader loses the thread, and a
// function that long does several things that want names of their own.
func TestFunctionLength(t *testing.T) {
	long := longFuncs(t, filepath.Join("..", ".."))
	var names []string
	for name := range long {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Errorf("%s is %d lines; cut it to at most %d", name, long[name], maxFuncLines)
	}
}
