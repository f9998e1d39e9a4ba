package contact_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// TestIdempotencyRules: another body is 422; failures are not stored; keys
// are per path and per client; REST and Connect share a key.
func TestIdempotencyRules(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Idem Rules")
	post := func(token, path, body, key string) (int, string, map[string]any) {
		s, hdr, b := h.Do(http.MethodPost, path, token, "application/json", body, "Idempotency-Key", key)
		return s, hdr.Get("Idempotent-Replayed"), servertest.Decode(t, b)
	}
	s, _, first := post(tn.Token, "/api/v1/contacts", `{"email":"k1@x.co"}`, "k1")
	if s != 201 {
		t.Fatalf("first: %d %v", s, first)
	}
	if s, _, p := post(tn.Token, "/api/v1/contacts", `{"email":"k1-other@x.co"}`, "k1"); s != 422 || p["code"] != "idempotency_key_reused" {
		t.Fatalf("other body: %d %v", s, p)
	}
	// A validation failure is not stored: a corrected retry with the same
	// key succeeds.
	if s, _, p := post(tn.Token, "/api/v1/contacts", `{"email":"broken"}`, "k2"); s != 422 || p["code"] != "validation_failed" {
		t.Fatalf("invalid: %d %v", s, p)
	}
	if s, r, p := post(tn.Token, "/api/v1/contacts", `{"email":"fixed@x.co"}`, "k2"); s != 201 || r != "" {
		t.Fatalf("corrected retry: %d %q %v", s, r, p)
	}
	// The same key on another path or for another client is independent.
	if s, r, p := post(tn.Token, "/api/v1/leads", `{"contact":{"email":"k1@x.co"}}`, "k1"); s != 201 || r != "" {
		t.Fatalf("other path: %d %q %v", s, r, p)
	}
	otherID, otherSec := h.Client(tn.WorkspaceID, tn.MemberID, "contacts:write")
	other := h.Token(otherID, otherSec, "")
	if s, _, p := post(other, "/api/v1/contacts", `{"email":"k1-second-client@x.co"}`, "k1"); s != 201 {
		t.Fatalf("other client: %d %v", s, p)
	}
	// Bad keys are malformed input.
	long := make([]byte, 256)
	for i := range long {
		long[i] = 'k'
	}
	if s, _, p := post(tn.Token, "/api/v1/contacts", `{"email":"long@x.co"}`, string(long)); s != 400 {
		t.Fatalf("256-char key: %d %v", s, p)
	}

	// Connect shares the key space with REST: a Connect retry of a REST
	// create replays it.
	c := leadv1connect.NewLeadServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	mk := func() *connect.Request[leadv1.CreateLeadRequest] {
		r := connect.NewRequest(&leadv1.CreateLeadRequest{Lead: &leadv1.Lead{Contact: &leadv1.LeadContact{Email: servertest.Ptr("rpc@x.co")}}})
		r.Header().Set("Idempotency-Key", "rpc-key")
		return r
	}
	a, err := c.CreateLead(context.Background(), mk())
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateLead(context.Background(), mk())
	if err != nil || b.Msg.GetLead().GetId() != a.Msg.GetLead().GetId() || b.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("connect replay: %v %v", b, err)
	}
	s, r, p := post(tn.Token, "/api/v1/leads", `{"contact":{"email":"rpc@x.co"}}`, "rpc-key")
	if s != 201 || r != "true" || p["id"] != a.Msg.GetLead().GetId() {
		t.Fatalf("REST replay of a Connect create: %d %q %v", s, r, p)
	}
}

// TestIdempotencyKeySentTwice: two Idempotency-Key field lines are a 400
// that creates nothing, on a create and on a batch: either key alone would
// be a guess at which earlier request this one retries.
func TestIdempotencyKeySentTwice(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Two Keys")
	for _, tc := range []struct{ path, body string }{
		{"/api/v1/contacts", `{"email":"twice@x.co"}`},
		{"/api/v1/leads", `{"contact":{"email":"twice-lead@x.co"}}`},
		{"/api/v1/contacts/batch", `{"contacts":[{"email":"twice-batch@x.co"}]}`},
	} {
		req, err := http.NewRequest(http.MethodPost, h.Public.URL+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Add("Idempotency-Key", "first")
		req.Header.Add("Idempotency-Key", "second")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if p := servertest.Decode(t, b); res.StatusCode != 400 || p["code"] != "malformed_request" || !servertest.HasViolation(p, "Idempotency-Key") {
			t.Errorf("POST %s with two keys: %d %s, want 400", tc.path, res.StatusCode, b)
		}
	}
	for _, path := range []string{"/api/v1/contacts", "/api/v1/leads"} {
		_, _, b := h.Do(http.MethodGet, path, tn.Token, "", "")
		if strings.Contains(string(b), "twice") {
			t.Errorf("a request with two keys created something: %s", b)
		}
	}
}
