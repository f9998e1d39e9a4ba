package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// markdownBlock returns the first block of the markdown file at path
// fenced with ```lang whose text contains has ("" matches any): the docs'
// examples, run by the tests as a reader would paste them.
func markdownBlock(t *testing.T, path, lang, has string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		switch line := sc.Text(); {
		case !in && line == "```"+lang:
			in = true
			b.Reset()
		case in && line == "```":
			if strings.Contains(b.String(), has) {
				return b.String()
			}
			in = false
		case in:
			b.WriteString(line + "\n")
		}
	}
	t.Fatalf("%s has no ```%s block containing %q", path, lang, has)
	return ""
}

// quickstart returns the README's quickstart, its first ```sh block.
func quickstart(t *testing.T) string { return markdownBlock(t, "../../README.md", "sh", "") }

// TestReadmeQuickstart pastes the README quickstart, verbatim, into bash
// next to a real `partnerapi serve`.
func TestReadmeQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required (make deps installs it)", tool)
		}
	}
	bin := buildBinary(t)
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(work, "bin", "partnerapi")); err != nil {
		t.Fatal(err)
	}
	dataDir, err := os.MkdirTemp("", "partnerapi-readme-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dataDir, 0o755)
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	d := startServe(t, bin, dataDir, "")

	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+quickstart(t))
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "BASE_URL=http://"+d.public, "PARTNER_ADMIN_URL=http://"+d.admin, "PARTNER_ADMIN_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("quickstart failed: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 4 {
		t.Fatalf("quickstart printed %d lines, want 4:\n%s", len(lines), out)
	}
	for i, want := range []string{`"workspace":{"id":"wks_`, `"id":"con_`, `"id":"lea_`, `"contacts":[{"id":"con_`} {
		if !strings.Contains(strings.ReplaceAll(lines[i], " ", ""), want) {
			t.Errorf("line %d = %s, want it to contain %s", i+1, lines[i], want)
		}
	}
}
