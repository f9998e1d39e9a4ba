package server_test

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/service/servertest"
)

type docBlock struct {
	line   int
	expect string
	// want, when the expect line names it, must be in the last answer.
	want  string
	setup bool
	code  string
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
	// A block may be indented, inside a list item: its lines lose the
	// indentation of its opening fence.
	var indent string
	expectRE := regexp.MustCompile(`^# expect (\d{3})(?: (.+))?$`)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cur != nil {
			line = strings.TrimPrefix(line, indent)
		}
		switch {
		case cur == nil && strings.TrimLeft(line, " ") == "```sh":
			cur = &docBlock{line: n}
			indent = line[:len(line)-len("```sh")]
		case cur != nil && line == "```":
			if cur.expect != "" || cur.setup {
				out = append(out, *cur)
			}
			cur = nil
		case cur != nil && cur.code == "" && cur.expect == "" && !cur.setup:
			if m := expectRE.FindStringSubmatch(line); m != nil {
				cur.expect, cur.want = m[1], m[2]
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

// readmeQuickstart runs the README's quickstart block, as a reader does,
// against h (the CLI built from cmd/partnerapi, talking to h's admin
// listener) and returns the API client it created.
func readmeQuickstart(t *testing.T, h *servertest.Harness) (clientID, clientSecret string) {
	t.Helper()
	work := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", work+"/bin/partnerapi", "../../cmd/partnerapi").CombinedOutput(); err != nil {
		t.Fatalf("build the CLI: %v\n%s", err, out)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "```sh\n")
	end := strings.Index(text[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatal("README.md has no ```sh block")
	}
	script := text[start+6:start+6+end] + `echo "CREDENTIALS $CLIENT_ID $CLIENT_SECRET"` + "\n"
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "BASE_URL="+h.Public.URL, "PARTNER_ADMIN_URL="+h.Admin.URL, "PARTNER_ADMIN_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README quickstart: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "CREDENTIALS" {
			return f[1], f[2]
		}
	}
	t.Fatalf("the quickstart printed no client:\n%s", out)
	return "", ""
}

// TestAPIDocExamples runs the curl examples of docs/api.md against a live
// server, after the README quickstart and in the order a reader meets
// them, and checks each status line.
func TestAPIDocExamples(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required (make deps installs it): %v", tool, err)
		}
	}
	h := servertest.New(t)
	// A reader runs the README quickstart first, then these examples in
	// order, with the quickstart's client and its data in the workspace.
	id, sec := readmeQuickstart(t, h)
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
		run := func() (string, error) {
			cmd := exec.Command("bash", "-c", setup+b.code)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		text, err := run()
		if err != nil {
			t.Errorf("docs/api.md:%d: %v\n%s\n%s", b.line, err, b.code, text)
			continue
		}
		// A read of the events feed may come before the change it wants
		// has passed the feed's watermark (a transaction open anywhere in
		// the cluster holds it back a while): a reader runs it again. Only
		// a plain GET is run again.
		if b.want != "" && !strings.Contains(b.code, " -d ") && !strings.Contains(b.code, " -X ") {
			dbtest.Until(30*time.Second, func() bool {
				if strings.Contains(text, b.want) {
					return true
				}
				again, err := run()
				if err == nil {
					text = again
				}
				return false
			})
		}
		// The last response printed by the block decides.
		i := strings.LastIndex(text, "HTTP/1.1 ")
		if i < 0 || !strings.HasPrefix(text[i:], "HTTP/1.1 "+b.expect) {
			t.Errorf("docs/api.md:%d: want HTTP %s\n%s\n%s", b.line, b.expect, b.code, text)
		} else if b.want != "" && !strings.Contains(text[i:], b.want) {
			t.Errorf("docs/api.md:%d: want %s in the answer\n%s\n%s", b.line, b.want, b.code, text)
		}
	}
}
