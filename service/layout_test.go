package service_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMachineryNeverImportsHandlers keeps the imports running one way,
// cmd → service → internal and db: a package of the machinery that needs a
// handler's code means that code sits in the wrong room (move it down,
// as auth.ParseBasic and rounds.ErrConflictGone were).
func TestMachineryNeverImportsHandlers(t *testing.T) {
	const service = "github.com/svat/partnerapi/service"
	for _, root := range []string{"../internal", "../db"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if p == service || strings.HasPrefix(p, service+"/") {
					t.Errorf("%s imports %s", path, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
