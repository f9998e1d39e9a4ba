package auth

import (
	"encoding/base64"
	"net/url"
	"strings"
)

// ParseBasic reads HTTP Basic client credentials as RFC 6749 §2.3.1 wants
// them: the client id and secret are each form-urlencoded before they are
// joined with ":" and base64-encoded. ok is false for anything malformed,
// including an empty client id.
func ParseBasic(header string) (id, secret string, ok bool) {
	const scheme = "basic "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", "", false
	}
	enc := strings.TrimLeft(header[len(scheme):], " ")
	if len(enc) > 4096 {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(enc)
		if err != nil {
			return "", "", false
		}
	}
	rawID, rawSecret, found := strings.Cut(string(raw), ":")
	if !found {
		return "", "", false
	}
	if id, err = url.QueryUnescape(rawID); err != nil || id == "" {
		return "", "", false
	}
	if secret, err = url.QueryUnescape(rawSecret); err != nil {
		return "", "", false
	}
	return id, secret, true
}

// IsBasic reports whether an Authorization header uses the Basic scheme.
func IsBasic(header string) bool {
	return len(header) >= 5 && strings.EqualFold(header[:5], "basic") && (len(header) == 5 || header[5] == ' ')
}
