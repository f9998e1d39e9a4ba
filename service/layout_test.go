package service_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/svat/partnerapi"

// goImports calls fn with every import of every Go file under root, test
// files included: a test that needs a package above its own is as much a
// sign of misplaced code as the package itself.
func goImports(t *testing.T, root string, fn func(file, imp string)) {
	t.Helper()
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
			fn(filepath.ToSlash(path), p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMachineryNeverImportsHandlers keeps the imports running one way,
// cmd → service → internal and db: a package of the machinery that needs a
// handler's code means that code sits in the wrong room (move it down,
// as auth.ParseBasic and rounds.ErrConflictGone were).
func TestMachineryNeverImportsHandlers(t *testing.T) {
	const service = module + "/service"
	for _, root := range []string{"../internal", "../db"} {
		goImports(t, root, func(file, p string) {
			if p == service || strings.HasPrefix(p, service+"/") {
				t.Errorf("%s imports %s", file, p)
			}
		})
	}
}

// TestInternalGroupsFormLayers keeps the groups under internal/ (edge,
// records, security, …) in layers: no group imports, directly or through
// others, a group that imports it. The layers today, from the bottom:
// contract and observe, then records, security, edge; work and webhook
// stand beside them. A cycle means a package sits in the wrong group (as
// requestid sat in edge while observe needed it) or a function in the
// wrong package: move it down rather than import up.
func TestInternalGroupsFormLayers(t *testing.T) {
	const internal = module + "/internal/"
	// imports[a][b] is a file of group a that imports group b.
	imports := map[string]map[string]string{}
	goImports(t, "../internal", func(file, p string) {
		rest, ok := strings.CutPrefix(p, internal)
		if !ok {
			return
		}
		from := strings.Split(strings.TrimPrefix(file, "../internal/"), "/")[0]
		to, _, _ := strings.Cut(rest, "/")
		if from == to {
			return
		}
		if imports[from] == nil {
			imports[from] = map[string]string{}
		}
		if _, seen := imports[from][to]; !seen {
			imports[from][to] = file + " imports " + p
		}
	})
	groups := make([]string, 0, len(imports))
	for g := range imports {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	// A depth-first walk from each group; a path back to the group is a
	// cycle, reported once, from its smallest group, with the import of
	// every step.
	for _, start := range groups {
		var walk func(path []string)
		reported := false
		walk = func(path []string) {
			last := path[len(path)-1]
			next := make([]string, 0, len(imports[last]))
			for g := range imports[last] {
				next = append(next, g)
			}
			slices.Sort(next)
			for _, g := range next {
				switch {
				case reported:
					return
				case g == start:
					var why []string
					for i, from := range path {
						to := start
						if i+1 < len(path) {
							to = path[i+1]
						}
						why = append(why, "\t"+imports[from][to])
					}
					t.Errorf("the groups %s import each other:\n%s", strings.Join(append(path, start), " → "), strings.Join(why, "\n"))
					reported = true
				case g > start && !slices.Contains(path, g):
					walk(append(path, g))
				}
			}
		}
		walk([]string{start})
	}
}

// TestDBImportsNothingOfInternal keeps db/ the floor of the module: the
// machinery under internal/ runs on db/, so db/ (its tests and test
// helpers too) imports nothing of internal/. What both need lives under
// db/ (as db/procenv does).
func TestDBImportsNothingOfInternal(t *testing.T) {
	const internal = module + "/internal"
	goImports(t, "../db", func(file, p string) {
		if p == internal || strings.HasPrefix(p, internal+"/") {
			t.Errorf("%s imports %s", file, p)
		}
	})
}
