package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestFieldCommands: `field create` defines a custom field under the
// API's rules (options as value:label pairs; key_in_use and validation
// refusals reach the operator), `field list` lists the workspace's
// definitions (of one object with --object), and a partner's token sees
// the same definition; `field delete` deletes it, it leaves the list and
// the API at once; a member of another workspace does not find it; both
// changes are audited with the member as actor; `field --help` lists the
// commands.
func TestFieldCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dataDir, err := os.MkdirTemp("", "partnerapi-field-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dataDir, 0o755)
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	d := startServe(t, bin, dataDir, "")
	ws := cli(t, bin, d, "", "workspace", "create", "--name", "Fields")["id"].(string)
	m := cli(t, bin, d, "", "member", "add", "--workspace", ws, "--email", "ops@fields.test", "--settings-access")["id"].(string)

	out := cli(t, bin, d, "", "field", "create", "--workspace", ws, "--member", m, "--object", "lead", "--key", "budget_band",
		"--label", "Budget band", "--type", "select", "--options", "low:Low,high:High: over 10k", "--required", "--description", "What they can spend")
	f, _ := out["customField"].(map[string]any)
	id, _ := f["id"].(string)
	if !strings.HasPrefix(id, "fld_") || f["key"] != "budget_band" || f["required"] != true || f["description"] != "What they can spend" ||
		fmt.Sprint(f["options"]) != "[map[label:Low value:low] map[label:High: over 10k value:high]]" {
		t.Fatalf("field create = %v", out)
	}
	cli(t, bin, d, "", "field", "create", "--workspace", ws, "--member", m, "--object", "contact", "--key", "birthday", "--label", "Birthday", "--type", "date")
	if msg := cliFails(t, bin, d, "", "field", "create", "--workspace", ws, "--member", m, "--object", "lead", "--key", "budget_band",
		"--label", "Again", "--type", "text"); !strings.Contains(msg, "key_in_use") {
		t.Fatalf("field create of a key in use: %q", msg)
	}
	if msg := cliFails(t, bin, d, "", "field", "create", "--workspace", ws, "--member", m, "--object", "lead", "--key", "Bad",
		"--label", "Bad", "--type", "text"); !strings.Contains(msg, "key") {
		t.Fatalf("field create of a bad key: %q", msg)
	}
	if msg := cliFails(t, bin, d, "", "field", "create", "--workspace", ws, "--member", m, "--object", "lead", "--key", "x",
		"--label", "X", "--type", "select", "--options", "nolabel"); !strings.Contains(msg, "value:label") {
		t.Fatalf("field create with bad --options: %q", msg)
	}

	list := cli(t, bin, d, "", "field", "list", "--workspace", ws)
	if fs, _ := list["customFields"].([]any); len(fs) != 2 || fs[0].(map[string]any)["id"] != id {
		t.Fatalf("field list = %v", list)
	}
	list = cli(t, bin, d, "", "field", "list", "--workspace", ws, "--object", "contact")
	if fs, _ := list["customFields"].([]any); len(fs) != 1 || fs[0].(map[string]any)["key"] != "birthday" {
		t.Fatalf("field list --object contact = %v", list)
	}

	c := cli(t, bin, d, "", "client", "create", "--workspace", ws, "--member", m, "--name", "Forms", "--scopes", "leads:read")
	code, tok := token(t, d, c["clientId"].(string), c["clientSecret"].(string))
	if code != http.StatusOK {
		t.Fatalf("token: %d", code)
	}
	if code, got := partnerCall(t, d, tok, "GET", "/api/v1/custom-fields/"+id, ""); code != http.StatusOK || got["key"] != "budget_band" {
		t.Fatalf("the partner's view: %d %v", code, got)
	}

	other := cli(t, bin, d, "", "workspace", "create", "--name", "Elsewhere")["id"].(string)
	om := cli(t, bin, d, "", "member", "add", "--workspace", other, "--email", "ops@elsewhere.test", "--settings-access")["id"].(string)
	if msg := cliFails(t, bin, d, "", "field", "delete", "--member", om, id); !strings.Contains(msg, "not_found") {
		t.Fatalf("field delete from another workspace: %q", msg)
	}
	if msg := cliFails(t, bin, d, "", "field", "delete", id); !strings.Contains(msg, "--member") {
		t.Fatalf("field delete without --member: %q", msg)
	}
	cli(t, bin, d, "", "field", "delete", "--member", m, id)
	if code, got := partnerCall(t, d, tok, "GET", "/api/v1/custom-fields/"+id, ""); code != http.StatusNotFound {
		t.Fatalf("the partner's view after delete: %d %v", code, got)
	}
	list = cli(t, bin, d, "", "field", "list", "--workspace", ws, "--object", "lead")
	if fs, _ := list["customFields"].([]any); len(fs) != 0 {
		t.Fatalf("field list after delete = %v", list)
	}

	audit := cli(t, bin, d, "", "audit", "list", "--workspace", ws, "--member", m)
	var seen []string
	for _, e := range audit["events"].([]any) {
		e := e.(map[string]any)
		if a, _ := e["action"].(string); strings.HasPrefix(a, "custom_field.") && e["targetId"] == id {
			seen = append(seen, a+" "+e["outcome"].(string)+" "+e["actorMemberId"].(string))
		}
	}
	want := []string{"custom_field.delete succeeded " + m, "custom_field.create succeeded " + m} // newest first
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}

	if code, help, _ := run1(t, bin, "field", "--help"); code != 0 || !strings.Contains(help, "delete --member M FIELD_ID") ||
		!strings.Contains(help, "create --workspace WS") {
		t.Fatalf("field --help:\n%s", help)
	}
}
