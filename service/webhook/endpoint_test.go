package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// TestCreateShowsTheSecretOnce: a create answers 201 with the endpoint,
// its Location and its whsec_ secret; GET and the list never show it.
func TestCreateShowsTheSecretOnce(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Create", allScopes...)
	status, hdr, b := h.Do(http.MethodPost, path, c.token, jsonCT,
		`{"url":"`+hookURL+`","eventTypes":["lead.created","lead.updated"],"description":" CRM sync "}`)
	if status != http.StatusCreated {
		t.Fatalf("create: status %d: %s", status, b)
	}
	e := servertest.Decode(t, b)
	id, _ := e["id"].(string)
	if !strings.HasPrefix(id, "whe_") {
		t.Errorf("id = %q, want whe_…", id)
	}
	if hdr.Get("Location") != path+"/"+id {
		t.Errorf("Location = %q", hdr.Get("Location"))
	}
	secret, _ := e["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") || len(secret) != len("whsec_")+44 {
		t.Errorf("secret = %q, want whsec_ and base64 of 32 bytes", secret)
	}
	if e["url"] != hookURL || e["status"] != "enabled" || e["description"] != "CRM sync" ||
		fmt.Sprint(e["eventTypes"]) != "[lead.created lead.updated]" || e["disabledReason"] != nil ||
		e["createdAt"] == nil || e["updatedAt"] == nil {
		t.Errorf("created endpoint = %s", b)
	}

	status, _, b = h.Do(http.MethodGet, path+"/"+id, c.token, "", "")
	if status != http.StatusOK || servertest.ID(t, b) != id {
		t.Fatalf("get: status %d: %s", status, b)
	}
	if strings.Contains(string(b), "secret") || strings.Contains(string(b), secret[6:]) {
		t.Errorf("get shows the secret: %s", b)
	}
	status, _, b = h.Do(http.MethodGet, path, c.token, "", "")
	if status != http.StatusOK {
		t.Fatalf("list: status %d: %s", status, b)
	}
	if strings.Contains(string(b), "secret") || strings.Contains(string(b), secret[6:]) {
		t.Errorf("list shows the secret: %s", b)
	}
	var list struct {
		WebhookEndpoints []struct{ ID, URL string } `json:"webhookEndpoints"`
	}
	servertest.MustUnmarshal(t, b, &list)
	if len(list.WebhookEndpoints) != 1 || list.WebhookEndpoints[0].ID != id {
		t.Errorf("list = %s", b)
	}
	// The stored secret, sealed, is the one shown.
	if stored := open(t, servertest.SecretKeys, c.ws, id, readAtRest(t, h, id).sealedSecret); stored != secret {
		t.Errorf("stored secret differs from the one shown")
	}
}

// TestCreateRefusesURLs: a URL that is not https, has user info or points
// at a refused address (loopback, private, link-local with the cloud
// metadata address, localhost) is a 422 naming url, and nothing is made.
func TestCreateRefusesURLs(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks URLs", allScopes...)
	for _, u := range []string{
		"http://receiver.example/hooks",
		"https://user:pass@receiver.example/hooks",
		"https://127.0.0.1/hooks",
		"https://localhost/hooks",
		"https://169.254.169.254/latest/meta-data",
		"https://10.1.2.3/hooks",
		"https://[::1]/hooks",
		"https://100.64.0.1/hooks",
		"ftp://receiver.example/hooks",
		"receiver.example/hooks",
		"https://receiver.example/" + strings.Repeat("a", 2048),
		"",
	} {
		status, _, b := h.Do(http.MethodPost, path, c.token, jsonCT, `{"url":"`+u+`","eventTypes":["lead.created"]}`)
		wantProblem(t, u, status, b, http.StatusUnprocessableEntity, "validation_failed", "url")
	}
	_, _, b := h.Do(http.MethodGet, path, c.token, "", "")
	if string(b) != `{"webhookEndpoints":[]}` {
		t.Errorf("list after refusals = %s", b)
	}
}

// TestCreateRefusesURLsThatReadAsSomethingElse (issue 34, items 5 and 6):
// a URL refuses the characters every text field refuses, with the same
// invalid_format violation and message; a host with letters of two
// scripts in one label or an invalid label is invalid_format too; a host
// that is an IP literal or localhost once IDNA-mapped (full-width,
// circled or mixed digits, ideographic or full-width dots) is refused
// like its ASCII form, address_not_allowed. On create and on PATCH.
func TestCreateRefusesURLsThatReadAsSomethingElse(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Look-alikes", allScopes...)
	id, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["lead.created"]}`)
	for _, tc := range []struct{ url, code, message string }{
		{"https://example.com/a\u202Eb", "invalid_format", "must not contain bidirectional control characters such as U+202E"},
		{"https://exa\u200Bmple.com/", "invalid_format", "must not contain invisible characters such as U+200B"},
		{"https://example.com/hooks/\u202Egpj.exe", "invalid_format", "U+202E"}, // reads as …/exe.jpg
		{"https://example.com/hooks?next=\u2066evil\u2069", "invalid_format", "U+2066"},
		{"https://example.com/hooks#\u2067x", "invalid_format", "U+2067"},
		{"https://example.com/\u200Fhooks", "invalid_format", "U+200F"},
		{"https://example.com/\u202Dhooks", "invalid_format", "U+202D"},
		{"https://exa\u200Dmple.com/", "invalid_format", "U+200D"},
		{"https://example.com\uFEFF/hooks", "invalid_format", "U+FEFF"},
		{"https://exa%E2%80%8Bmple.com/", "invalid_format", "U+200B"}, // percent-encoded in the host
		{"https://\u0435\u0445ample.com/hooks", "invalid_format", "Cyrillic"},
		{"https://xn--exmple-4nf.com/hooks", "invalid_format", "Cyrillic"},
		{"https://xn--zz.example/hooks", "invalid_format", "xn--zz"},
		{"https://\uff11\uff12\uff17.\uff10.\uff10.\uff11/hooks", "address_not_allowed", "host address 127.0.0.1 is not allowed: loopback"},
		{"https://127\u30020\u30020\u30021/hooks", "address_not_allowed", "loopback"},
		{"https://127\uff0e0\uff0e0\uff0e1/hooks", "address_not_allowed", "loopback"},
		{"https://\uff11\uff10.0.0.1/hooks", "address_not_allowed", "private"},
		{"https://\u2460\u2461\u2466.\u24ea.\u24ea.\u2460/hooks", "address_not_allowed", "loopback"},
		{"https://\uff11\uff16\uff19.254.169.254/latest/meta-data", "address_not_allowed", "link-local"},
		{"https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/hooks", "address_not_allowed", "loopback"},
		{"https://\uff11\uff12\uff17.\uff11/hooks", "invalid_format", "not a valid host name"},
		{"https://\u2474.0.0.1/hooks", "invalid_format", "U+2474"},
	} {
		// Written as JSON escapes, so the test shows what it sends.
		var u string
		if err := json.Unmarshal([]byte(`"`+tc.url+`"`), &u); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"url": u, "eventTypes": []string{"lead.created"}})
		status, _, b := h.Do(http.MethodPost, path, c.token, jsonCT, string(body))
		wantViolation(t, "create "+tc.url, status, b, tc.code, tc.message)
		body, _ = json.Marshal(map[string]any{"url": u})
		status, _, b = h.Do(http.MethodPatch, path+"/"+id, c.token, "application/merge-patch+json", string(body))
		wantViolation(t, "patch "+tc.url, status, b, tc.code, tc.message)
	}
	_, _, b := h.Do(http.MethodGet, path, c.token, "", "")
	var list struct {
		WebhookEndpoints []struct{ URL string } `json:"webhookEndpoints"`
	}
	servertest.MustUnmarshal(t, b, &list)
	if len(list.WebhookEndpoints) != 1 || list.WebhookEndpoints[0].URL != hookURL {
		t.Errorf("list after refusals = %s", b)
	}
}

// wantViolation checks a 422 validation_failed whose url violation has
// the code and a message containing message.
func wantViolation(t *testing.T, what string, status int, b []byte, code, message string) {
	t.Helper()
	wantProblem(t, what, status, b, http.StatusUnprocessableEntity, "validation_failed", "url")
	if status != http.StatusUnprocessableEntity {
		return
	}
	errs, _ := servertest.Decode(t, b)["errors"].([]any)
	for _, e := range errs {
		v, _ := e.(map[string]any)
		if v["field"] == "url" && v["code"] == code && strings.Contains(fmt.Sprint(v["message"]), message) {
			return
		}
	}
	t.Errorf("%s: no url violation %s with %q: %s", what, code, message, b)
}

// TestUnicodeHostsAreALabels (issue 34, item 5): a host in Unicode is
// stored and answered as IDNA A-labels (punycode), on create, GET, list
// and PATCH, so it reads as what is dialled; the rest of the URL is kept
// as sent. A name in one non-Latin script is accepted and shown as its
// A-label; a public IP literal in full-width digits is its ASCII form.
func TestUnicodeHostsAreALabels(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks IDN", allScopes...)
	for _, tc := range []struct{ sent, want string }{
		{"https://bücher.example/hook", "https://xn--bcher-kva.example/hook"},
		{"https://BÜCHER.Example:8443/hooks?q=ü#top", "https://xn--bcher-kva.example:8443/hooks?q=ü#top"},
		{"https://b%C3%BCcher.example/hook", "https://xn--bcher-kva.example/hook"},
		{"https://пример.example/hook", "https://xn--e1afmkfd.example/hook"},
		{"https://bücher。example/hook", "https://xn--bcher-kva.example/hook"},
		{"https://８.８.８.８/hook", "https://8.8.8.8/hook"},
	} {
		body, _ := json.Marshal(map[string]any{"url": tc.sent, "eventTypes": []string{"lead.created"}})
		id, e := create(t, h, c.token, string(body))
		if e["url"] != tc.want {
			t.Errorf("create %s: url %v, want %s", tc.sent, e["url"], tc.want)
		}
		_, _, b := h.Do(http.MethodGet, path+"/"+id, c.token, "", "")
		if got := servertest.Decode(t, b)["url"]; got != tc.want {
			t.Errorf("get %s: url %v, want %s", tc.sent, got, tc.want)
		}
		var stored string
		if err := dbtest.Raw(t, h.DB).QueryRow(context.Background(), `SELECT url FROM webhook_endpoints WHERE id = $1`,
			uid(t, opaqueid.Webhook, id)).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored != tc.want {
			t.Errorf("create %s: stored %s, want %s", tc.sent, stored, tc.want)
		}
	}
	_, _, b := h.Do(http.MethodGet, path, c.token, "", "")
	if strings.Contains(string(b), "ücher") || strings.Contains(string(b), "ÜCHER") || strings.Contains(string(b), "пример") || !strings.Contains(string(b), `"https://xn--e1afmkfd.example/hook"`) {
		t.Errorf("list shows a host that is not A-labels: %s", b)
	}
	id, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["lead.created"]}`)
	status, _, b := h.Do(http.MethodPatch, path+"/"+id, c.token, "application/merge-patch+json", `{"url":"https://straße.example/in"}`)
	if status != http.StatusOK || servertest.Decode(t, b)["url"] != "https://xn--strae-oqa.example/in" {
		t.Errorf("patch to a Unicode host: status %d: %s", status, b)
	}
}

// TestEventTypesWithinScopes: eventTypes must be non-empty, known, and
// readable under the token's scopes.
func TestEventTypesWithinScopes(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Types", "contacts:read", "webhooks:read", "webhooks:write")
	for _, body := range []string{
		`{"url":"` + hookURL + `","eventTypes":["lead.created"]}`,
		`{"url":"` + hookURL + `","eventTypes":["contact.created","lead.deleted"]}`,
		`{"url":"` + hookURL + `","eventTypes":["contact.exploded"]}`,
		`{"url":"` + hookURL + `","eventTypes":["webhook.test"]}`,
		`{"url":"` + hookURL + `","eventTypes":[]}`,
		`{"url":"` + hookURL + `"}`,
	} {
		status, _, b := h.Do(http.MethodPost, path, c.token, jsonCT, body)
		wantProblem(t, body, status, b, http.StatusUnprocessableEntity, "validation_failed", "eventTypes")
	}
	status, _, b := h.Do(http.MethodPost, path, c.token, jsonCT, `{"url":"`+hookURL+`","eventTypes":["contact.created","contact.deleted","contact.created"]}`)
	if status != http.StatusCreated || fmt.Sprint(servertest.Decode(t, b)["eventTypes"]) != "[contact.created contact.deleted]" {
		t.Errorf("readable types: status %d: %s", status, b)
	}
	status, _, b = h.Do(http.MethodPost, path, c.token, jsonCT,
		`{"url":"`+hookURL+`","eventTypes":["contact.created"],"description":"`+strings.Repeat("d", 501)+`"}`)
	wantProblem(t, "long description", status, b, http.StatusUnprocessableEntity, "validation_failed", "description")
}

// TestEndpointsBelongToTheirClient: another client of the same workspace
// and a client of another workspace see none of the endpoint: 404 for
// every call on it, an empty list.
func TestEndpointsBelongToTheirClient(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	a := newClient(h, "Hooks Owner", allScopes...)
	b := addClient(h, a.ws, a.member, allScopes...)
	other := newClient(h, "Hooks Other", allScopes...)
	id, _ := create(t, h, a.token, `{"url":"`+hookURL+`","eventTypes":["lead.created"]}`)
	for _, c := range []client{b, other} {
		for _, call := range []struct{ method, path, body string }{
			{http.MethodGet, path + "/" + id, ""},
			{http.MethodPatch, path + "/" + id, `{"description":"mine now"}`},
			{http.MethodPost, path + "/" + id + "/rotate-secret", `{}`},
			{http.MethodPost, path + "/" + id + "/test", `{}`},
			{http.MethodPost, path + "/" + id + "/replay", `{"fromCursor":"x"}`},
			{http.MethodGet, path + "/" + id + "/deliveries", ""},
			{http.MethodDelete, path + "/" + id, ""},
		} {
			ct := ""
			if call.body != "" {
				ct = jsonCT
			}
			status, _, body := h.Do(call.method, call.path, c.token, ct, call.body)
			if call.method == http.MethodPost && strings.HasSuffix(call.path, "/replay") {
				// The cursor is checked first: it is not one of the
				// caller's workspace either way.
				wantProblem(t, call.method+" "+call.path, status, body, http.StatusBadRequest, "malformed_request", "fromCursor")
				continue
			}
			wantProblem(t, call.method+" "+call.path, status, body, http.StatusNotFound, "not_found", "")
		}
		_, _, body := h.Do(http.MethodGet, path, c.token, "", "")
		if string(body) != `{"webhookEndpoints":[]}` {
			t.Errorf("another client's list = %s", body)
		}
	}
	status, _, body := h.Do(http.MethodGet, path+"/"+id, a.token, "", "")
	if status != http.StatusOK || servertest.Decode(t, body)["description"] != nil {
		t.Errorf("owner's get after the others tried: status %d: %s", status, body)
	}
	for _, bad := range []string{"whe_nope", "con_" + id[4:], strings.ToUpper(id)} {
		status, _, body := h.Do(http.MethodGet, path+"/"+bad, a.token, "", "")
		wantProblem(t, bad, status, body, http.StatusNotFound, "not_found", "")
	}
}

// TestMergePatch: a PATCH changes the members it sends and keeps the
// others; status disabled is disabledReason manual, enabled clears it; a
// read-only member is a 400 naming it; a patch that changes nothing
// writes nothing (no audit row, same updatedAt).
func TestMergePatch(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Patch", allScopes...)
	id, created := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["lead.created"],"description":"first"}`)
	patch := func(body string) (int, map[string]any, []byte) {
		t.Helper()
		status, _, b := h.Do(http.MethodPatch, path+"/"+id, c.token, "application/merge-patch+json", body)
		if status != http.StatusOK {
			return status, nil, b
		}
		return status, servertest.Decode(t, b), b
	}

	_, e, b := patch(`{"eventTypes":["lead.created","contact.deleted"],"url":"https://other.example/in"}`)
	if e == nil || fmt.Sprint(e["eventTypes"]) != "[lead.created contact.deleted]" || e["url"] != "https://other.example/in" ||
		e["description"] != "first" || e["status"] != "enabled" || e["secret"] != nil {
		t.Fatalf("patch types and url: %s", b)
	}
	if e["createdAt"] != created["createdAt"] || e["updatedAt"] == created["updatedAt"] {
		t.Errorf("patch: createdAt %v updatedAt %v, created %v %v", e["createdAt"], e["updatedAt"], created["createdAt"], created["updatedAt"])
	}
	_, e, b = patch(`{"status":"disabled"}`)
	if e == nil || e["status"] != "disabled" || e["disabledReason"] != "manual" {
		t.Fatalf("disable: %s", b)
	}
	_, e, b = patch(`{"status":"enabled","description":null}`)
	if e == nil || e["status"] != "enabled" || e["disabledReason"] != nil || e["description"] != nil || e["url"] != "https://other.example/in" {
		t.Fatalf("enable and clear description: %s", b)
	}

	before := auditActions(t, h, c)
	_, same, b := patch(`{"status":"enabled","url":"https://other.example/in"}`)
	if same == nil || same["updatedAt"] != e["updatedAt"] {
		t.Errorf("unchanging patch: %s (was %v)", b, e["updatedAt"])
	}
	if after := auditActions(t, h, c); len(after) != len(before) {
		t.Errorf("an unchanging patch was audited: %v", after[len(before):])
	}

	for _, tc := range []struct {
		body, field string
		status      int
		code        string
	}{
		{`{"status":"paused"}`, "status", http.StatusUnprocessableEntity, "validation_failed"},
		{`{"status":null}`, "status", http.StatusUnprocessableEntity, "validation_failed"},
		{`{"url":"http://127.0.0.1/x"}`, "url", http.StatusUnprocessableEntity, "validation_failed"},
		{`{"url":null}`, "url", http.StatusUnprocessableEntity, "validation_failed"},
		{`{"eventTypes":[]}`, "eventTypes", http.StatusUnprocessableEntity, "validation_failed"},
		{`{"secret":"whsec_mine"}`, "secret", http.StatusBadRequest, "malformed_request"},
		{`{"disabledReason":"failing"}`, "disabledReason", http.StatusBadRequest, "malformed_request"},
		{`{"id":"whe_x"}`, "id", http.StatusBadRequest, "malformed_request"},
	} {
		status, _, b := patch(tc.body)
		wantProblem(t, tc.body, status, b, tc.status, tc.code, tc.field)
	}
	// An administrator's disabling is not the client's to undo.
	if _, err := dbtest.Raw(t, h.DB).Exec(context.Background(),
		`UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'admin' WHERE id = $1`, uid(t, opaqueid.Webhook, id)); err != nil {
		t.Fatal(err)
	}
	status, _, b := patch(`{"status":"enabled"}`)
	wantProblem(t, "enable an admin-disabled endpoint", status, b, http.StatusConflict, "failed_precondition", "")
	_, e, b = patch(`{"status":"disabled"}`)
	if e == nil || e["disabledReason"] != "admin" {
		t.Errorf("disable an admin-disabled endpoint keeps the reason: %s", b)
	}
}

// TestResumeRedeliversGivenUp: enabling an endpoint disabled as failing
// makes its given-up deliveries pending again (delivery.Resume in the
// PATCH's transaction).
func TestResumeRedeliversGivenUp(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Resume", allScopes...)
	id, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["contact.created"]}`)
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	ws, ep := uid(t, opaqueid.Workspace, c.ws), uid(t, opaqueid.Webhook, id)
	if _, err := raw.Exec(ctx, `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'failing' WHERE workspace_id = $1 AND id = $2`, ws, ep); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, `INSERT INTO webhook_deliveries (workspace_id, endpoint_id, event_xid, event_seq, event_id, event_type, record_id, status, attempts)
		VALUES ($1, $2, 1, 1, gen_random_uuid(), 'contact.created', gen_random_uuid(), 'failed', 9)`, ws, ep); err != nil {
		t.Fatal(err)
	}
	status, _, b := h.Do(http.MethodPatch, path+"/"+id, c.token, jsonCT, `{"status":"enabled"}`)
	if status != http.StatusOK || servertest.Decode(t, b)["status"] != "enabled" {
		t.Fatalf("enable: status %d: %s", status, b)
	}
	var failed int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE workspace_id = $1 AND endpoint_id = $2 AND status = 'failed'`, ws, ep).Scan(&failed); err != nil {
		t.Fatal(err)
	}
	if failed != 0 {
		t.Errorf("%d given-up deliveries left after enabling", failed)
	}
}

// TestDelete: 204, then the endpoint is 404 and gone from the list; a
// second delete is 404.
func TestDelete(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Delete", allScopes...)
	id, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["lead.created"]}`)
	keep, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["lead.updated"]}`)
	status, _, b := h.Do(http.MethodDelete, path+"/"+id, c.token, "", "")
	if status != http.StatusNoContent || len(b) != 0 {
		t.Fatalf("delete: status %d: %s", status, b)
	}
	status, _, b = h.Do(http.MethodGet, path+"/"+id, c.token, "", "")
	wantProblem(t, "get after delete", status, b, http.StatusNotFound, "not_found", "")
	status, _, b = h.Do(http.MethodDelete, path+"/"+id, c.token, "", "")
	wantProblem(t, "second delete", status, b, http.StatusNotFound, "not_found", "")
	_, _, b = h.Do(http.MethodGet, path, c.token, "", "")
	if !strings.Contains(string(b), keep) || strings.Contains(string(b), id) {
		t.Errorf("list after delete = %s", b)
	}
}

// TestCapPerClient: a client has at most MaxEndpoints endpoints; one more
// is a 409, and another client is not affected.
func TestCapPerClient(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Cap", allScopes...)
	body := `{"url":"` + hookURL + `","eventTypes":["lead.created"]}`
	for range 16 {
		create(t, h, c.token, body)
	}
	status, _, b := h.Do(http.MethodPost, path, c.token, jsonCT, body)
	wantProblem(t, "17th endpoint", status, b, http.StatusConflict, "failed_precondition", "")
	other := addClient(h, c.ws, c.member, allScopes...)
	create(t, h, other.token, body)

	// Concurrent creates do not pass the cap together.
	racer := addClient(h, c.ws, c.member, allScopes...)
	statuses := make(chan int, 24)
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			status, _, _, err := h.Send(http.MethodPost, path, racer.token, jsonCT, body)
			if err != nil {
				t.Error(err)
			}
			statuses <- status
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for st := range statuses {
		count[st]++
	}
	if count[http.StatusCreated] != 16 || count[http.StatusConflict] != 8 {
		t.Errorf("24 concurrent creates: %v, want 16 created and 8 conflicts", count)
	}
}

// TestScopes: webhooks:read lists and reads but cannot change (403
// insufficient_scope naming webhooks:write); without webhooks:read even
// the list is 403.
func TestScopes(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	w := newClient(h, "Hooks Scopes", allScopes...)
	id, _ := create(t, h, w.token, `{"url":"`+hookURL+`","eventTypes":["lead.created"]}`)
	r := addClient(h, w.ws, w.member, "leads:read", "webhooks:read")
	status, _, b := h.Do(http.MethodGet, path, r.token, "", "")
	if status != http.StatusOK || string(b) != `{"webhookEndpoints":[]}` {
		t.Errorf("read-only list: status %d: %s", status, b)
	}
	for _, call := range []struct{ method, path string }{
		{http.MethodPost, path},
		{http.MethodPatch, path + "/" + id},
		{http.MethodDelete, path + "/" + id},
		{http.MethodPost, path + "/" + id + "/rotate-secret"},
		{http.MethodPost, path + "/" + id + "/test"},
		{http.MethodPost, path + "/" + id + "/replay"},
	} {
		status, hdr, b := h.Do(call.method, call.path, r.token, jsonCT, `{}`)
		wantProblem(t, call.method+" "+call.path, status, b, http.StatusForbidden, "insufficient_scope", "")
		if !strings.Contains(hdr.Get("WWW-Authenticate"), `scope="webhooks:write"`) {
			t.Errorf("%s %s: WWW-Authenticate %q", call.method, call.path, hdr.Get("WWW-Authenticate"))
		}
	}
	n := addClient(h, w.ws, w.member, "leads:read")
	for _, p := range []string{path, path + "/" + id, path + "/" + id + "/deliveries"} {
		status, _, b := h.Do(http.MethodGet, p, n.token, "", "")
		wantProblem(t, "GET "+p+" without webhooks:read", status, b, http.StatusForbidden, "insufficient_scope", "")
	}
}

// TestChangesAreAudited: create, update, rotate, replay and delete each
// write an audit row naming the client (no member actor) and the
// endpoint; reads write none.
func TestChangesAreAudited(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Audit", allScopes...)
	id, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["contact.created"]}`)
	h.Do(http.MethodGet, path, c.token, "", "")
	h.Do(http.MethodGet, path+"/"+id, c.token, "", "")
	h.Do(http.MethodGet, path+"/"+id+"/deliveries", c.token, "", "")
	mustStatus(t, h, http.MethodPatch, path+"/"+id, c.token, `{"description":"x"}`, http.StatusOK)
	mustStatus(t, h, http.MethodPost, path+"/"+id+"/rotate-secret", c.token, `{}`, http.StatusOK)
	mustStatus(t, h, http.MethodPost, path+"/"+id+"/replay", c.token, `{"fromCursor":"`+feedCursor(t, h, c)+`"}`, http.StatusAccepted)
	mustStatus(t, h, http.MethodDelete, path+"/"+id, c.token, "", http.StatusNoContent)
	want := []string{"webhook_endpoint.create " + id, "webhook_endpoint.update " + id, "webhook_endpoint.rotate_secret " + id,
		"webhook_endpoint.replay " + id, "webhook_endpoint.delete " + id}
	if got := auditActions(t, h, c); !slices.Equal(got, want) {
		t.Errorf("audit = %v, want %v", got, want)
	}
}

func mustStatus(t *testing.T, h *servertest.Harness, method, p, token, body string, want int) []byte {
	t.Helper()
	ct := ""
	if body != "" {
		ct = jsonCT
	}
	status, _, b := h.Do(method, p, token, ct, body)
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, p, status, want, b)
	}
	return b
}

// TestConditionalRequests: GET carries an ETag (304 for If-None-Match);
// PATCH and DELETE honour If-Match (412 when stale).
func TestConditionalRequests(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks ETag", allScopes...)
	id, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["lead.created"]}`)
	_, hdr, _ := h.Do(http.MethodGet, path+"/"+id, c.token, "", "")
	tag := hdr.Get("ETag")
	if !strings.HasPrefix(tag, `"`) {
		t.Fatalf("ETag = %q", tag)
	}
	if status, _, b := h.Do(http.MethodGet, path+"/"+id, c.token, "", "", "If-None-Match", tag); status != http.StatusNotModified {
		t.Errorf("If-None-Match: status %d: %s", status, b)
	}
	status, hdr, b := h.Do(http.MethodPatch, path+"/"+id, c.token, jsonCT, `{"description":"v2"}`, "If-Match", tag)
	if status != http.StatusOK || hdr.Get("ETag") == tag || hdr.Get("ETag") == "" {
		t.Fatalf("PATCH with a fresh If-Match: status %d, ETag %q: %s", status, hdr.Get("ETag"), b)
	}
	status, _, b = h.Do(http.MethodPatch, path+"/"+id, c.token, jsonCT, `{"description":"v3"}`, "If-Match", tag)
	wantProblem(t, "PATCH with a stale If-Match", status, b, http.StatusPreconditionFailed, "precondition_failed", "")
	status, _, b = h.Do(http.MethodDelete, path+"/"+id, c.token, "", "", "If-Match", tag)
	wantProblem(t, "DELETE with a stale If-Match", status, b, http.StatusPreconditionFailed, "precondition_failed", "")
	if status, _, b := h.Do(http.MethodGet, path+"/"+id, c.token, "", ""); status != http.StatusOK || servertest.Decode(t, b)["description"] != "v2" {
		t.Errorf("after refused changes: status %d: %s", status, b)
	}
}

// TestIdempotentCreate: the same Idempotency-Key and body replays the
// first answer (the same endpoint and secret, Idempotent-Replayed) and
// makes no second endpoint; another body is 422. Deleting the endpoint
// erases the stored answer, which holds its secret.
func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Idempotent", allScopes...)
	body := `{"url":"` + hookURL + `","eventTypes":["lead.created"]}`
	status, _, first := h.Do(http.MethodPost, path, c.token, jsonCT, body, "Idempotency-Key", "k1")
	if status != http.StatusCreated {
		t.Fatalf("create: status %d: %s", status, first)
	}
	status, hdr, again := h.Do(http.MethodPost, path, c.token, jsonCT, body, "Idempotency-Key", "k1")
	if status != http.StatusCreated || hdr.Get("Idempotent-Replayed") != "true" || !servertest.SameJSON(t, first, again) {
		t.Errorf("replay: status %d, replayed %q: %s, first %s", status, hdr.Get("Idempotent-Replayed"), again, first)
	}
	status, _, b := h.Do(http.MethodPost, path, c.token, jsonCT, `{"url":"`+hookURL+`","eventTypes":["lead.updated"]}`, "Idempotency-Key", "k1")
	wantProblem(t, "another body", status, b, http.StatusUnprocessableEntity, "idempotency_key_reused", "")
	_, _, list := h.Do(http.MethodGet, path, c.token, "", "")
	if n := strings.Count(string(list), `"whe_`); n != 1 {
		t.Errorf("%d endpoints after a replayed create: %s", n, list)
	}
	id := servertest.ID(t, first)
	mustStatus(t, h, http.MethodDelete, path+"/"+id, c.token, "", http.StatusNoContent)
	var stored int
	if err := dbtest.Raw(t, h.DB).QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys WHERE workspace_id = $1 AND key = 'k1'`,
		uid(t, opaqueid.Workspace, c.ws)).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Errorf("the stored answer with the deleted endpoint's secret is kept")
	}
}
