package server_test

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

type docBlock struct {
	line   int
	expect string
	setup  bool
	code   string
}

// shellBlocks returns the ```sh blocks of a markdown file that start with
// "# expect NNN" (checked) or "# sets" (setup run before later blocks).
func shellBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docBlock
	var cur *docBlock
	expectRE := regexp.MustCompile(`^# expect (\d{3})$`)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && line == "```sh":
			cur = &docBlock{line: n}
		case cur != nil && line == "```":
			if cur.expect != "" || cur.setup {
				out = append(out, *cur)
			}
			cur = nil
		case cur != nil && cur.code == "" && cur.expect == "" && !cur.setup:
			if m := expectRE.FindStringSubmatch(line); m != nil {
				cur.expect = m[1]
			} else if strings.HasPrefix(line, "# sets ") {
				cur.setup = true
			} else {
				cur.code += line + "\n"
			}
		case cur != nil:
			cur.code += line + "\n"
		}
	}
	return out
}

// TestAPIDocExamples runs the curl examples of docs/api.md against a live
// server and checks each status line.
func TestAPIDocExamples(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required (make deps installs it): %v", tool, err)
		}
	}
	h := servertest.New(t)
	ws, m := h.Workspace("Docs Co")
	id, sec := h.Client(ws, m, "contacts:read", "contacts:write", "leads:read", "leads:write")
	blocks := shellBlocks(t, "../../docs/api.md")
	if len(blocks) < 15 {
		t.Fatalf("found only %d runnable examples", len(blocks))
	}
	env := append(os.Environ(), "BASE_URL="+h.Public.URL, "CLIENT_ID="+id, "CLIENT_SECRET="+sec)
	setup := "set -euo pipefail\n"
	for _, b := range blocks {
		if b.setup {
			setup += b.code
			continue
		}
		cmd := exec.Command("bash", "-c", setup+b.code)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("docs/api.md:%d: %v\n%s\n%s", b.line, err, b.code, out)
			continue
		}
		// The last response printed by the block decides.
		text := string(out)
		i := strings.LastIndex(text, "HTTP/1.1 ")
		if i < 0 || !strings.HasPrefix(text[i:], "HTTP/1.1 "+b.expect) {
			t.Errorf("docs/api.md:%d: want HTTP %s\n%s\n%s", b.line, b.expect, b.code, out)
		}
	}
}
