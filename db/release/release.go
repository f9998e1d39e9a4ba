// Package release reads PREVIOUS_RELEASE, the file a release is made by:
// one line, "<commit> <MAJOR.MINOR.PATCH>", the last main that landed and
// its release number. make test-upgrade builds that commit and upgrades
// from it, make bench measures the write lines against it, and make
// check-migrations takes the migrations its commit lists as landed. One
// reader, so that the three agree on what the file says.
package release

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// File is the file's name, at the repository's root.
const File = "PREVIOUS_RELEASE"

// Previous is what the file records.
type Previous struct {
	// Commit is the landed main's commit (7 to 40 hex digits).
	Commit string
	// Version is its release number, as its binary reports it.
	Version string
}

var (
	commitPattern  = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
	versionPattern = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+$`)
)

// Parse reads the file's text.
func Parse(b []byte) (Previous, error) {
	f := strings.Fields(string(b))
	if len(f) != 2 || !commitPattern.MatchString(f[0]) || !versionPattern.MatchString(f[1]) {
		return Previous{}, fmt.Errorf("parse %s: %q, want one line \"<commit> <MAJOR.MINOR.PATCH>\"", File, strings.TrimSpace(string(b)))
	}
	return Previous{Commit: f[0], Version: f[1]}, nil
}

// Read reads the file at path.
func Read(path string) (Previous, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Previous{}, fmt.Errorf("read previous release: %w", err)
	}
	p, err := Parse(b)
	if err != nil {
		return Previous{}, fmt.Errorf("read previous release %s: %w", path, err)
	}
	return p, nil
}
