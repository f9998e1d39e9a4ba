package release

import "testing"

// TestParse: the repository's own file parses, and what is not one line
// of a commit and a release number does not.
func TestParse(t *testing.T) {
	p, err := Read("../../" + File)
	if err != nil || p.Commit == "" || p.Version == "" {
		t.Fatalf("the repository's %s: %+v, %v", File, p, err)
	}
	if p, err := Parse([]byte("e5294d6 1.3.0\n")); err != nil || p != (Previous{"e5294d6", "1.3.0"}) {
		t.Errorf("Parse: %+v, %v", p, err)
	}
	for _, bad := range []string{"", "e5294d6", "e5294d6 1.3", "E5294D6 1.3.0", "e5294d6 1.3.0 extra", "main 1.3.0"} {
		if p, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", bad, p)
		}
	}
}
