package token

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/svat/partnerapi/internal/security/scope"
)

// Metadata is the token service's RFC 8414 document: where the token and
// revocation endpoints are, and what they accept. Issuer is the public
// base URL (PARTNER_PUBLIC_URL); when empty, each answer derives it from
// its request and may not be cached by others.
type Metadata struct {
	Issuer string
}

// MetadataPath is where RFC 8414 puts the metadata of an issuer without
// a path.
const MetadataPath = "/.well-known/oauth-authorization-server"

// Metadata serves the RFC 8414 authorization server metadata, at [MetadataPath]
// and, when the issuer has a path, at metadataPath followed by it.
func (m Metadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p, ip := r.URL.EscapedPath(), issuerPath(m.Issuer); p != MetadataPath && (ip == "" || p != MetadataPath+ip) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("Not Found\n"))
		return
	}
	issuer, cache := m.Issuer, "public, max-age=3600"
	if issuer == "" {
		// Derived from the request, so it says whatever the caller's Host
		// says: a shared cache must never keep it for someone else.
		scheme := "http"
		if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
			scheme = "https"
		}
		issuer, cache = scheme+"://"+r.Host, "no-store"
	}
	issuer = strings.TrimSuffix(issuer, "/")
	methods := []string{"client_secret_basic", "client_secret_post"}
	body, _ := json.Marshal(map[string]any{
		"issuer":                                     issuer,
		"token_endpoint":                             issuer + "/api/oauth/token",
		"revocation_endpoint":                        issuer + "/api/oauth/revoke",
		"grant_types_supported":                      []string{"client_credentials"},
		"response_types_supported":                   []string{},
		"token_endpoint_auth_methods_supported":      methods,
		"revocation_endpoint_auth_methods_supported": methods,
		"scopes_supported":                           scope.Names(),
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", cache)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// issuerPath is the path of a configured issuer without its final "/",
// or "" when it has none.
func issuerPath(issuer string) string {
	u, err := url.Parse(issuer)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.EscapedPath(), "/")
}
