package funclen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines bounds a product function, its signature and closing brace
// included.
const maxLines = 80

// TestNoProductFunctionIsLongerThan80Lines reads every Go file of the
// product (not the tests, test/ or the build helpers under hack/) and names
// each function over maxLines.
func TestNoProductFunctionIsLongerThan80Lines(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch rel, _ := filepath.Rel(root, path); {
			case rel == "test", rel == "hack", rel == "bin", strings.HasPrefix(d.Name(), ".") && rel != ".":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files := token.NewFileSet()
		f, err := parser.ParseFile(files, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := files.Position(fn.End()).Line - files.Position(fn.Pos()).Line + 1; n > maxLines {
				t.Errorf("%s: %s is %d lines, more than %d: split it into named steps", files.Position(fn.Pos()), fn.Name.Name, n, maxLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
