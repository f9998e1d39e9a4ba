// Package migrationsum keeps db/migrations.sum, the SHA-256 of every
// migration in db/migrations and a total over them, as Atlas's atlas.sum
// does, because a landed migration is history.
//
// goose records which versions a database has applied, never what they
// contained, and does not apply a version twice. A migration edited after
// it landed (00010 was, in four commits; 00060 in three; 00011 in two) thus
// leaves every database migrated before the edit silently different from
// one migrated after it. The sum file makes such an edit visible in three
// places:
//
//   - [Check] recomputes the hash of every file and compares it with the
//     sum file, so an edited, renamed or removed migration fails, and so
//     does a new one whose hash was not added (a forgotten
//     `make migrations-sum`). It needs nothing but the files, so it holds
//     in any checkout, shallow or not.
//   - [CheckHistory] compares the sum file with every committed version of
//     it that git has: each migration must keep the hash it had in the
//     first commit that listed it, and stay listed, unless that commit came
//     after PREVIOUS_RELEASE's (the last main that landed): such a
//     migration has not landed and may still be fixed. This is what stops an
//     edit together with a regenerated sum file, which [Check] alone would
//     pass. Without git or without any committed version it is skipped,
//     with a note; a shallow clone is checked against the commits it has
//     (CI runs on a full clone, .ci/run; a depth-1 checkout would see only
//     HEAD's sum file, so give such a CI the history: fetch-depth 0).
//   - `make migrations-sum` runs [CheckHistory] before writing, so it adds
//     new files and re-hashes uncommitted ones, but refuses to change or
//     drop a committed entry.
//
// History is compared with the first commit that listed each file, not
// with HEAD~1 or the merge base with main: the previous commit misses an
// edit made two commits back, the merge base needs a remote that a CI
// checkout may lack, and an edit that got merged anyway is repaired by
// restoring the original bytes, which then pass again.
//
// The total hash makes two branches that each add a migration conflict in
// git on the sum file, so the second to merge must rebase and renumber
// (goose refuses to apply a version lower than one already applied).
//
// The rule binds from the first commit that holds the sum file: the edits
// made before it stay as they are. A migration committed on an unmerged
// branch is bound too; to fix it before the merge, rewrite the branch so
// that no commit holds the wrong version, or add a new migration.
package migrationsum

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/svat/partnerapi/db/procenv"
	"github.com/svat/partnerapi/db/release"
)

// Entry is one migration: its file name and the hex SHA-256 of its bytes.
type Entry struct {
	Name, Hash string
}

// Sum is the checksum of a migration directory: one entry per *.sql file,
// sorted by name (goose's order, since versions are zero-padded).
type Sum []Entry

// Compute hashes the *.sql files at the root of fsys: the files that
// db.Migrations embeds (migrations/*.sql).
func Compute(fsys fs.FS) (Sum, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	s := make(Sum, 0, len(names))
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration: %w", err)
		}
		h := sha256.Sum256(b)
		s = append(s, Entry{Name: name, Hash: hex.EncodeToString(h[:])})
	}
	return s, nil
}

// Total is the SHA-256 of the entries' lines, in order: any change to the
// list (a file added, removed, renamed or edited) changes it.
func (s Sum) Total() string {
	h := sha256.New()
	for _, e := range s {
		fmt.Fprintf(h, "%s %s\n", e.Name, e.Hash)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// header opens every sum file; Parse skips it like any comment.
const header = `# The SHA-256 of every migration in db/migrations, and of this list (total).
# A landed migration is history: never edit, rename or remove one; add a new
# one and run ` + "`make migrations-sum`" + ` (CONTRIBUTING.md). Checked by
# ` + "`make check-migrations`" + ` (make lint) and TestMigrationsAreHistory (go test ./db).
# Written by ` + "`make migrations-sum`" + `; never edit it by hand.
`

// Format is the sum file's content: the header, the total, then one line
// per migration.
func (s Sum) Format() []byte {
	var b bytes.Buffer
	b.WriteString(header)
	fmt.Fprintf(&b, "total %s\n", s.Total())
	for _, e := range s {
		fmt.Fprintf(&b, "%s %s\n", e.Name, e.Hash)
	}
	return b.Bytes()
}

// Parse reads a sum file and returns its entries and the total it states.
// Blank lines and lines starting with # are skipped.
func Parse(b []byte) (s Sum, total string, err error) {
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 || !isHash(fields[1]) {
			return nil, "", fmt.Errorf("line %d: want \"<file> <sha256 hex>\" or \"total <sha256 hex>\", got %q", n, line)
		}
		name, hash := fields[0], fields[1]
		if name == "total" {
			if total != "" {
				return nil, "", fmt.Errorf("line %d: a second total", n)
			}
			total = hash
			continue
		}
		if seen[name] {
			return nil, "", fmt.Errorf("line %d: %s listed twice", n, name)
		}
		seen[name] = true
		s = append(s, Entry{Name: name, Hash: hash})
	}
	if err := sc.Err(); err != nil {
		return nil, "", err
	}
	if total == "" {
		return nil, "", errors.New("no total line")
	}
	return s, total, nil
}

func isHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// Check compares the sum file's content with the migrations' actual hashes
// and returns what differs, one sentence a problem; none means the file is
// exactly what `make migrations-sum` would write.
func Check(file []byte, actual Sum) []string {
	listed, total, err := Parse(file)
	if err != nil {
		return []string{fmt.Sprintf("the sum file does not parse (%v): run `make migrations-sum`", err)}
	}
	var problems []string
	if total != listed.Total() {
		problems = append(problems, "the total does not match the listed entries: the file was edited by hand or merged; "+
			"run `make migrations-sum`")
	}
	want := index(listed)
	got := index(actual)
	for _, e := range listed {
		h, ok := got[e.Name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s is listed but is not in db/migrations: "+
				"a landed migration is never removed or renamed", e.Name))
		case h != e.Hash:
			problems = append(problems, fmt.Sprintf("%s does not match its listed SHA-256 (%s, listed %s): "+
				"a landed migration is never edited, so undo the edit and add a new migration; "+
				"only a migration that was never committed may be re-hashed with `make migrations-sum`",
				e.Name, short(h), short(e.Hash)))
		}
	}
	for _, e := range actual {
		if _, ok := want[e.Name]; !ok {
			problems = append(problems, fmt.Sprintf("%s is not listed: run `make migrations-sum` and commit "+
				"the sum file with the migration", e.Name))
		}
	}
	if problems == nil && !bytes.Equal(file, actual.Format()) {
		problems = append(problems, "the entries are right but the file is not as `make migrations-sum` writes it "+
			"(order, header or spacing): run `make migrations-sum`")
	}
	return problems
}

func index(s Sum) map[string]string {
	m := make(map[string]string, len(s))
	for _, e := range s {
		m[e.Name] = e.Hash
	}
	return m
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// CheckHistory compares s, the sum about to be (or already) in the file at
// sumPath, with every version of that file committed in the history of
// HEAD: each migration must keep the hash of the first commit that listed
// it, and none may be dropped. problems are the violations, one sentence
// each. note, when not empty, says why the check was skipped or partial
// (no git, not a work tree, no committed version yet, a shallow clone).
func CheckHistory(ctx context.Context, sumPath string, s Sum) (problems []string, note string, err error) {
	dir, file := filepath.Split(sumPath)
	if dir == "" {
		dir = "."
	}
	git := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		// Only what git needs to read the repository under the user's
		// configuration (safe.directory lives there): an inherited GIT_DIR
		// or GIT_INDEX_FILE (make run from a hook) would point it at
		// another repository, and nothing else of ours is its business.
		cmd.Env = procenv.Env([]string{"HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"})
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		return nil, "git not found: the sum file's history was not checked", nil
	}
	if out, err := git("rev-parse", "--is-inside-work-tree"); err != nil || strings.TrimSpace(string(out)) != "true" {
		return nil, "not a git work tree: the sum file's history was not checked", nil
	}
	if _, err := git("rev-parse", "--verify", "--quiet", "HEAD"); err != nil {
		return nil, "no commit yet: the sum file's history was not checked", nil
	}
	// Oldest first; "./" makes the path relative to dir, not to the root.
	out, err := git("log", "--format=%H", "--reverse", "HEAD", "--", "./"+file)
	if err != nil {
		return nil, "", err
	}
	commits := strings.Fields(string(out))
	if len(commits) == 0 {
		return nil, "no commit holds " + sumPath + " yet: its history was not checked", nil
	}
	if out, err := git("rev-parse", "--is-shallow-repository"); err == nil && strings.TrimSpace(string(out)) == "true" {
		note = fmt.Sprintf("shallow clone: checked only against the committed versions present (%d)", len(commits))
	}

	type first struct{ hash, commit string }
	firsts := map[string]first{}
	var order []string
	for _, c := range commits {
		b, err := git("show", c+":./"+file)
		if err != nil {
			continue // the commit deleted the file
		}
		listed, _, err := Parse(b)
		if err != nil {
			return nil, "", fmt.Errorf("%s at commit %s: %w", sumPath, short(c), err)
		}
		for _, e := range listed {
			if _, ok := firsts[e.Name]; !ok {
				firsts[e.Name] = first{e.Hash, c}
				order = append(order, e.Name)
			}
		}
	}
	// A migration first listed after the previous release's commit
	// (PREVIOUS_RELEASE, the last main that landed) has run on no database
	// but developers' and tests': until it lands, it may still be fixed.
	//
	// What landed is each migration as the previous release's commit
	// lists it: an edit made before that commit (while the migration had
	// not landed) landed with it, and is what a later edit is compared
	// with.
	released := func(string) bool { return true }
	var prev string
	var landed map[string]string
	if b, err := git("show", "HEAD:"+release.File); err == nil {
		if p, err := release.Parse(b); err == nil {
			if _, err := git("cat-file", "-e", p.Commit+"^{commit}"); err == nil {
				prev = p.Commit
				released = func(c string) bool {
					_, err := git("merge-base", "--is-ancestor", c, prev)
					return err == nil
				}
				if b, err := git("show", prev+":./"+file); err == nil {
					if listed, _, err := Parse(b); err == nil {
						landed = map[string]string{}
						for _, e := range listed {
							landed[e.Name] = e.Hash
						}
					}
				}
			}
		}
	}
	now := index(s)
	for _, name := range order {
		f := firsts[name]
		h, ok := now[name]
		if l, ok := landed[name]; ok {
			f = first{l, prev}
		}
		switch {
		case ok && h != f.hash && !released(f.commit):
			// Not landed yet: an edit is allowed.
		case !ok:
			problems = append(problems, fmt.Sprintf("%s was committed in %s and is gone: "+
				"a landed migration is never removed or renamed", name, short(f.commit)))
		case h != f.hash:
			problems = append(problems, fmt.Sprintf("%s changed since commit %s listed it (%s, then %s): "+
				"a landed migration is never edited; restore it (git show %s:db/migrations/%s) and add a new migration",
				name, short(f.commit), short(h), short(f.hash), short(f.commit), name))
		}
	}
	return problems, note, nil
}
