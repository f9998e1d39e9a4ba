package restgw

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/edge/jsoncodec"
	"github.com/svat/partnerapi/internal/observe/requestid"
)

// codeTemporarilyUnavailable is the OAuth error of a 503.
const codeTemporarilyUnavailable = "temporarily_unavailable"

// oauthBody is RFC 6749 §5.2.
type oauthBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// problem is RFC 9457 application/problem+json with our extension members.
type problem struct {
	Type        string                    `json:"type"`
	Title       string                    `json:"title"`
	Status      int                       `json:"status"`
	Detail      string                    `json:"detail"`
	Code        string                    `json:"code"`
	RequestID   string                    `json:"requestId"`
	ExistingID  string                    `json:"existingId,omitempty"`
	LeadCount   int32                     `json:"leadCount,omitempty"`
	RecordCount int32                     `json:"recordCount,omitempty"`
	Errors      []apierror.FieldViolation `json:"errors"`
}

// WriteError is the REST error writer. It renders e as OAuth JSON when
// oauth is set (the /api/oauth/ endpoints) and as problem+json otherwise.
// status 0 means the status of e's code. (The admin API's errors of the
// call are google.rpc.Status instead; see [Google].)
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
		body = marshal(oauthBody{Error: code, Description: oauthText(e.Message)})
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("Pragma", "no-cache")
	} else {
		p := problem{
			Type: apierror.ProblemType(e.Code), Title: apierror.Title(e.Code), Status: status,
			Detail: e.Message, Code: e.Code, RequestID: requestid.FromContext(ctx),
			ExistingID: e.ExistingID, LeadCount: e.LeadCount, RecordCount: e.RecordCount, Errors: e.Fields,
		}
		if p.Errors == nil {
			p.Errors = []apierror.FieldViolation{}
		}
		body = marshal(p)
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

// writeStatus answers an error of a Google gateway's call as a
// google.api.http transcoder does: the google.rpc.Status of the error
// (its RPC code, its message, its details) as JSON, under the HTTP status
// of its RPC code.
func writeStatus(w http.ResponseWriter, ce *connect.Error) {
	st := &status.Status{Code: int32(ce.Code()), Message: ce.Message()} //nolint:gosec // RPC codes are small
	for _, d := range ce.Details() {
		st.Details = append(st.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()})
	}
	body, err := jsoncodec.AppendREST(nil, st)
	if err != nil {
		body = []byte(`{"code":13,"message":"failed to marshal end error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(apierror.RPCStatus(ce.Code()))
	_, _ = w.Write(body)
}

// marshal is json.Marshal without its HTML escaping: an answer is read
// by programs and people, not embedded in a page, and "Bearer <token>"
// should read as that, not as "Bearer \u003ctoken\u003e".
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
