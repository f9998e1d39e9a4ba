package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// TestIndexPointsAtTheContract: GET / on the public listener says where
// the docs, the OpenAPI document and the token endpoint are, and each
// path it names answers (issue 24, item 10). Before, / was a 404 problem.
func TestIndexPointsAtTheContract(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	s, hdr, b := h.Do(http.MethodGet, "/", "", "", "")
	if s != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /: %d %s %s", s, hdr.Get("Content-Type"), b)
	}
	var idx map[string]string
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if idx["docs"] == "" || idx["openapi"] != "/openapi.json" || idx["tokenEndpoint"] != "/api/oauth/token" {
		t.Fatalf("GET / = %s", b)
	}
	for _, p := range []string{idx["openapi"], idx["oauthMetadata"], idx["health"]} {
		if s, _, b := h.Do(http.MethodGet, p, "", "", ""); s != 200 {
			t.Errorf("GET %s (named by /): %d %s", p, s, b)
		}
	}
	if s, _, _ := h.Do(http.MethodGet, "/nothing-here", "", "", ""); s != 404 {
		t.Errorf("GET /nothing-here: %d, want 404 still", s)
	}
}
