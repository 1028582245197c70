package inject

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// Every Reason constant declared in this package has a distinct metric code:
// a reason added without one would label its metric with an empty value.
func TestEveryReasonHasACode(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, name := range files {
		file, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
					continue
				}
				for _, n := range vs.Names {
					declared++
					if _, ok := codes[Reason(constValue(t, vs, n))]; !ok {
						t.Errorf("%s: %s has no code in codes", name, n.Name)
					}
				}
			}
		}
	}
	seen := map[string]bool{}
	for r, c := range codes {
		if c == "" || seen[c] {
			t.Errorf("reason %q: code %q is empty or used twice", r, c)
		}
		seen[c] = true
	}
	if declared != len(codes) {
		t.Errorf("%d Reason constants declared, %d codes", declared, len(codes))
	}
}

func constValue(t *testing.T, vs *ast.ValueSpec, n *ast.Ident) string {
	for i, name := range vs.Names {
		if name == n {
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok {
				t.Fatalf("%s is not a string literal", n.Name)
			}
			return lit.Value[1 : len(lit.Value)-1]
		}
	}
	return ""
}
