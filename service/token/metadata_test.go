package token_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// TestAuthorizationServerMetadata checks RFC 8414 metadata.
func TestAuthorizationServerMetadata(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	s, _, b := h.Do(http.MethodGet, "/.well-known/oauth-authorization-server", "", "", "")
	if s != 200 {
		t.Fatalf("status %d", s)
	}
	md := servertest.Decode(t, b)
	if md["issuer"] != h.Public.URL || md["token_endpoint"] != h.Public.URL+"/api/oauth/token" ||
		md["revocation_endpoint"] != h.Public.URL+"/api/oauth/revoke" {
		t.Fatalf("endpoints: %v", md)
	}
	if g, _ := json.Marshal(md["grant_types_supported"]); string(g) != `["client_credentials"]` {
		t.Errorf("grant_types_supported = %s", g)
	}
	if a, _ := json.Marshal(md["token_endpoint_auth_methods_supported"]); string(a) != `["client_secret_basic","client_secret_post"]` {
		t.Errorf("auth methods = %s", a)
	}
	if sc, _ := json.Marshal(md["scopes_supported"]); string(sc) != `["contacts:read","contacts:write","leads:read","leads:write","apps:read","webhooks:read","webhooks:write","fields:write"]` {
		t.Errorf("scopes_supported = %s", sc)
	}
}

// TestMetadataOfAnIssuerWithAPath: RFC 8414 §3.1 puts the metadata of an
// issuer with a path (PARTNER_PUBLIC_URL=https://host/partner) at
// /.well-known/oauth-authorization-server/partner, and §3.3 has the client
// check the issuer it finds there; that address answered 404. The
// address without the path keeps answering, and other suffixes are 404.
func TestMetadataOfAnIssuerWithAPath(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, servertest.Options{Config: func(c *server.Config) { c.Issuer = "https://api.partner.example/partner/" }})
	for _, path := range []string{"/.well-known/oauth-authorization-server/partner", "/.well-known/oauth-authorization-server"} {
		s, hdr, b := h.Do(http.MethodGet, path, "", "", "")
		if s != 200 || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %v %s", path, s, hdr, b)
		}
		m := servertest.Decode(t, b)
		if m["issuer"] != "https://api.partner.example/partner" || m["token_endpoint"] != "https://api.partner.example/partner/api/oauth/token" {
			t.Fatalf("%s: %s", path, b)
		}
	}
	for _, path := range []string{"/.well-known/oauth-authorization-server/other", "/.well-known/oauth-authorization-server/partner/x"} {
		if s, _, b := h.Do(http.MethodGet, path, "", "", ""); s != 404 {
			t.Errorf("%s: %d %s, want 404", path, s, b)
		}
	}
	plain := servertest.New(t, servertest.Options{DB: h.DB})
	if s, _, b := plain.Do(http.MethodGet, "/.well-known/oauth-authorization-server/partner", "", "", ""); s != 404 {
		t.Errorf("derived issuer has no path, yet a path suffix answered %d %s", s, b)
	}
}

// TestMetadataPathSuffixWithoutIssuerPath: an issuer without a path has
// its metadata at the well-known path only.
func TestMetadataPathSuffixWithoutIssuerPath(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, servertest.Options{Config: func(c *server.Config) { c.Issuer = "https://api.partner.example/" }})
	for _, path := range []string{"/.well-known/oauth-authorization-server/", "/.well-known/oauth-authorization-server/x"} {
		if s, _, b := h.Do(http.MethodGet, path, "", "", ""); s != 404 {
			t.Errorf("%s: %d %s, want 404", path, s, b)
		}
	}
}
