package webhook_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

const (
	path    = "/api/v1/webhook-endpoints"
	jsonCT  = "application/json"
	hookURL = "https://receiver.example/hooks"
)

// every scope a webhook client may hold.
var allScopes = []string{"contacts:read", "contacts:write", "leads:read", "leads:write", "webhooks:read", "webhooks:write"}

// client is an API client of a workspace and a token of it.
type client struct {
	ws, member, id, token string
}

// newClient creates a workspace and a client of it with scopes.
func newClient(h *servertest.Harness, name string, scopes ...string) client {
	h.T.Helper()
	ws, m := h.Workspace(name)
	return addClient(h, ws, m, scopes...)
}

// addClient adds a client with scopes to a workspace.
func addClient(h *servertest.Harness, ws, member string, scopes ...string) client {
	h.T.Helper()
	id, sec := h.FastClient(ws, member, scopes...)
	return client{ws: ws, member: member, id: id, token: h.Token(id, sec, "")}
}

// create makes an endpoint and returns its id and its answer.
func create(t *testing.T, h *servertest.Harness, token, body string) (string, map[string]any) {
	t.Helper()
	status, _, b := h.Do(http.MethodPost, path, token, jsonCT, body)
	if status != http.StatusCreated {
		t.Fatalf("create: status %d: %s", status, b)
	}
	return servertest.ID(t, b), servertest.Decode(t, b)
}

// wantProblem checks a problem answer's status, code and the field it
// names (none when field is "").
func wantProblem(t *testing.T, what string, status int, b []byte, wantStatus int, code, field string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("%s: status %d, want %d: %s", what, status, wantStatus, b)
		return
	}
	p := servertest.Decode(t, b)
	if p["code"] != code {
		t.Errorf("%s: code %v, want %s: %s", what, p["code"], code, b)
	}
	if field != "" && !servertest.HasViolation(p, field) {
		t.Errorf("%s: no violation naming %s: %s", what, field, b)
	}
}

// uid is the UUID of an opaque id.
func uid(t *testing.T, prefix, id string) uuid.UUID {
	t.Helper()
	u, ok := opaqueid.Parse(prefix, id)
	if !ok {
		t.Fatalf("bad id %q", id)
	}
	return u
}

// auditActions lists the workspace's audit actions by a client, oldest
// first, each with the endpoint it names ("action whe_…").
func auditActions(t *testing.T, h *servertest.Harness, c client) []string {
	t.Helper()
	rows, err := dbtest.Raw(t, h.DB).Query(context.Background(),
		`SELECT action || coalesce(' ' || target_id, '') FROM audit_events WHERE workspace_id = $1 AND client_id = $2 AND actor_member_id IS NULL ORDER BY id`,
		uid(t, opaqueid.Workspace, c.ws), uid(t, opaqueid.Client, c.id))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
