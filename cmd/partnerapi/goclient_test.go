package main

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestGoClientModule builds and vets clients/go, a module of its own, and
// runs its example against a real server: GetMe over Connect, a keyed
// create and a paged list over gRPC on h2c, with the token interceptor
// (issue 24, items 8 and 10). The module must not import the server's.
func TestGoClientModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module and runs the binary")
	}
	t.Parallel()
	const dir = "../../clients/go"
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}, {"list", "-deps", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %v in clients/go: %v\n%s", args, err, out)
		}
		if args[0] == "list" {
			for _, pkg := range strings.Fields(string(out)) {
				if strings.HasPrefix(pkg, "github.com/svat/partnerapi/") && !strings.HasPrefix(pkg, "github.com/svat/partnerapi/clients/go") {
					t.Errorf("clients/go depends on the server's package %s", pkg)
				}
			}
		}
	}

	bin := buildBinary(t)
	d := startServe(t, bin, t.TempDir(), "")
	ws := cli(t, bin, d, "", "workspace", "create", "--name", "Go")["id"].(string)
	m := cli(t, bin, d, "", "member", "add", "--workspace", ws, "--email", "go@example.com", "--settings-access")["id"].(string)
	c := cli(t, bin, d, "", "client", "create", "--workspace", ws, "--member", m, "--name", "go", "--scopes", "contacts:read contacts:write")
	id, secret := c["clientId"].(string), c["clientSecret"].(string)
	status, tok := token(t, d, id, secret)
	if status != 200 {
		t.Fatalf("token: %d", status)
	}
	for _, email := range []string{"a@example.com", "b@example.com"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.public+"/api/v1/contacts", strings.NewReader(`{"email":"`+email+`"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 201 {
			t.Fatalf("seed contact: %d", res.StatusCode)
		}
	}

	run := exec.Command("go", "run", "./example")
	run.Dir = dir
	run.Env = append(os.Environ(), "BASE_URL=http://"+d.public, "CLIENT_ID="+id, "CLIENT_SECRET="+secret)
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("example: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"workspace"`) || !strings.Contains(lines[1], `"id":"con_`) ||
		strings.ReplaceAll(lines[2], " ", "") != `{"contacts":3}` {
		t.Fatalf("example printed:\n%s\nwant GetMe, the new contact, and 3 contacts walked over pages of 2", out)
	}
}
