package customfield_test

import (
	"context"
	"net/http"
	"os"
	"testing"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// TestMain runs the package's tests on its own PostgreSQL and fails the
// run if a test leaves a goroutine behind.
func TestMain(m *testing.M) { os.Exit(dbtest.MainLeakChecked(m)) }

const (
	path   = "/api/v1/custom-fields"
	jsonCT = "application/json"
)

// allScopes are every scope a client of these tests may need.
var allScopes = []string{"contacts:read", "contacts:write", "leads:read", "leads:write", "apps:read", "fields:write"}

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

// create defines a field over REST and returns its id and its answer.
func create(t *testing.T, h *servertest.Harness, token, body string) (string, map[string]any) {
	t.Helper()
	status, _, b := h.Do(http.MethodPost, path, token, jsonCT, body)
	if status != http.StatusCreated {
		t.Fatalf("create %s: status %d: %s", body, status, b)
	}
	return servertest.ID(t, b), servertest.Decode(t, b)
}

// wantProblem checks a problem answer's status, code and the field it
// names (none when field is "").
func wantProblem(t *testing.T, what string, status int, b []byte, wantStatus int, code, field string) map[string]any {
	t.Helper()
	if status != wantStatus {
		t.Errorf("%s: status %d, want %d: %s", what, status, wantStatus, b)
		return nil
	}
	p := servertest.Decode(t, b)
	if p["code"] != code {
		t.Errorf("%s: code %v, want %s: %s", what, p["code"], code, b)
	}
	if field != "" && !servertest.HasViolation(p, field) {
		t.Errorf("%s: no violation naming %s: %s", what, field, b)
	}
	return p
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

// exec runs raw SQL, for setting up values on records.
func exec(t *testing.T, h *servertest.Harness, sql string, args ...any) int64 {
	t.Helper()
	tag, err := dbtest.Raw(t, h.DB).Exec(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return tag.RowsAffected()
}

// newContact creates a contact over REST and returns its UUID.
func newContact(t *testing.T, h *servertest.Harness, token, email string) uuid.UUID {
	t.Helper()
	status, _, b := h.Do(http.MethodPost, "/api/v1/contacts", token, jsonCT, `{"email":"`+email+`"}`)
	if status != http.StatusCreated {
		t.Fatalf("create contact: status %d: %s", status, b)
	}
	return uid(t, opaqueid.Contact, servertest.ID(t, b))
}
