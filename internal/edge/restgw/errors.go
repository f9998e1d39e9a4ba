package restgw

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/svat/partnerapi/internal/edge/apierror"
	"github.com/svat/partnerapi/internal/edge/requestid"
)

// IsOAuthPath reports whether errors on path use RFC 6749 §5.2 bodies.
func IsOAuthPath(path string) bool { return strings.HasPrefix(path, "/api/oauth/") }

// codeTemporarilyUnavailable is the OAuth error of a 503.
const codeTemporarilyUnavailable = "temporarily_unavailable"

// oauthBody is RFC 6749 §5.2.
type oauthBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// problem is RFC 9457 application/problem+json with our extension members.
type problem struct {
	Type       string                    `json:"type"`
	Title      string                    `json:"title"`
	Status     int                       `json:"status"`
	Detail     string                    `json:"detail"`
	Code       string                    `json:"code"`
	RequestID  string                    `json:"requestId"`
	ExistingID string                    `json:"existingId,omitempty"`
	Errors     []apierror.FieldViolation `json:"errors"`
}

// ProblemType is the "type" URI of a problem code. The codes are listed in
// docs/api.md.
func ProblemType(code string) string { return apierror.ProblemType(code) }

// WriteError is the one REST error writer. It renders e as OAuth JSON when
// oauth is set (the /api/oauth/ endpoints) and as problem+json otherwise.
// status 0 means the status of e's code.
func WriteError(w http.ResponseWriter, ctx context.Context, oauth bool, status int, e *apierror.Error) {
	if status == 0 {
		status = apierror.HTTPStatus(e.Code)
	}
	h := w.Header()
	h.Del("Content-Length")
	if e.Challenge != "" {
		h.Set("WWW-Authenticate", e.Challenge)
	}
	if e.RetryAfter != "" {
		h.Set("Retry-After", e.RetryAfter)
	}
	for k, v := range e.Header {
		h[k] = v
	}
	var body []byte
	if oauth {
		code := e.Code
		switch {
		case status == http.StatusServiceUnavailable:
			// RFC 6749 §4.1.2.1's code for a server that cannot answer now.
			code, e.Message = codeTemporarilyUnavailable, "the authorization server is temporarily unavailable; retry later"
		case status >= 500:
			code, e.Message = apierror.CodeServerError, "the authorization server could not process the request"
		case code == apierror.CodeRateLimited:
			// Not an RFC 6749 code, but the one a client must branch on.
		case !apierror.IsOAuthCode(code):
			// e.g. payload_too_large: keep the status, use an RFC 6749 code.
			code = apierror.CodeInvalidRequest
		}
		body, _ = json.Marshal(oauthBody{Error: code, Description: oauthText(e.Message)})
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("Pragma", "no-cache")
	} else {
		p := problem{
			Type: ProblemType(e.Code), Title: apierror.Title(e.Code), Status: status,
			Detail: e.Message, Code: e.Code, RequestID: requestid.FromContext(ctx),
			ExistingID: e.ExistingID, Errors: e.Fields,
		}
		if p.Errors == nil {
			p.Errors = []apierror.FieldViolation{}
		}
		body, _ = json.Marshal(p)
		h.Set("Content-Type", "application/problem+json")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// oauthText keeps an error_description to the characters RFC 6749 §5.2
// allows, printable ASCII without the double quote and the backslash: a
// description may name what the caller sent (a scope, a parameter, a
// path). A double quote becomes an apostrophe, any other character
// outside the set a question mark.
func oauthText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '"':
			return '\''
		case r < 0x20 || r > 0x7e || r == '\\':
			return '?'
		}
		return r
	}, s)
}
