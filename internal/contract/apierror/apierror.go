// Package apierror is the one place where domain errors meet protocols.
//
// Handlers return an [*Error] carrying a machine-readable code. [ToConnect]
// turns it into a Connect error: the RPC code comes from the code's row in
// one table, and the details are google.rpc.ErrorInfo (reason = the code)
// and google.rpc.BadRequest field violations. The REST gateway calls the
// handlers in process, gets the error back from those details
// ([FromConnect]) and renders it as RFC 6749 JSON or RFC 9457
// problem+json with the HTTP status of the same table, or, on the admin
// API, as the google.rpc.Status with the status the table gives its RPC
// code ([RPCStatus]).
package apierror

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	problemv1 "github.com/svat/partnerapi/gen/partner/problem/v1"
)

// Realm is the protection space of every challenge.
const Realm = "partner-api"

// Codes. The OAuth ones are RFC 6749 §5.2 / RFC 6750 §3.1 error codes; the
// others are the problem+json "code" member of /api/v1 errors.
const (
	CodeInvalidRequest       = "invalid_request"
	CodeInvalidClient        = "invalid_client"
	CodeUnsupportedGrantType = "unsupported_grant_type"
	CodeInvalidScope         = "invalid_scope"
	CodeServerError          = "server_error"

	CodeUnauthenticated     = "unauthenticated"
	CodeInvalidToken        = "invalid_token"
	CodeInsufficientScope   = "insufficient_scope"
	CodeMalformedRequest    = "malformed_request"
	CodeValidationFailed    = "validation_failed"
	CodeDuplicate           = "duplicate"
	CodeIdempotencyInFlight = "idempotency_key_in_use"
	CodeIdempotencyMismatch = "idempotency_key_reused"
	CodeSecretRetired       = "idempotency_secret_retired"
	CodeNotFound            = "not_found"
	CodeMethodNotAllowed    = "method_not_allowed"
	CodeUnsupportedMedia    = "unsupported_media_type"
	CodePayloadTooLarge     = "payload_too_large"
	CodeRateLimited         = "rate_limited"
	CodePermissionDenied    = "permission_denied"
	CodeFailedPrecondition  = "failed_precondition"
	CodePreconditionFailed  = "precondition_failed"
	CodeContactHasLeads     = "contact_has_leads"
	CodeKeyInUse            = "key_in_use"
	CodeOptionInUse         = "option_in_use"
	CodeLimitExceeded       = "limit_exceeded"
	CodeCursorExpired       = "cursor_expired"
	CodeInternal            = "internal_error"
	CodeUnavailable         = "unavailable"
)

// row is one problem code: its HTTP status and its problem title.
type row struct {
	code   string
	status int
	title  string
}

// table is the one mapping between RPC codes, HTTP statuses and problem
// codes. Each RPC code has the HTTP status google.api.http gives it
// (google.rpc.Code's mapping, the admin API's statuses) and lists the
// problem codes sent with it, each with the status and title of its REST
// answer (problem+json, RFC 6749 JSON). An error that carries no problem
// code of ours (the RPC framework's own, a cancelled call) is answered as
// its RPC code's status and the first problem code of that status in
// this order, internal_error when none has it: so the general code of a
// status comes first (malformed_request before invalid_request, and
// failed_precondition, a FailedPrecondition, before duplicate and
// idempotency_key_in_use, for a bare 409).
var table = []struct {
	rpc    connect.Code
	status int
	codes  []row
}{
	{connect.CodeInvalidArgument, http.StatusBadRequest, []row{
		{CodeMalformedRequest, http.StatusBadRequest, "Malformed request"},
		{CodeInvalidRequest, http.StatusBadRequest, "Invalid request"},
		{CodeUnsupportedGrantType, http.StatusBadRequest, "Unsupported grant type"},
		{CodeInvalidScope, http.StatusBadRequest, "Invalid scope"},
		{CodeValidationFailed, http.StatusUnprocessableEntity, "Validation failed"},
		{CodeUnsupportedMedia, http.StatusUnsupportedMediaType, "Unsupported media type"},
	}},
	{connect.CodeUnauthenticated, http.StatusUnauthorized, []row{
		{CodeUnauthenticated, http.StatusUnauthorized, "Authentication required"},
		{CodeInvalidClient, http.StatusUnauthorized, "Client authentication failed"},
		{CodeInvalidToken, http.StatusUnauthorized, "Invalid access token"},
	}},
	{connect.CodePermissionDenied, http.StatusForbidden, []row{
		{CodePermissionDenied, http.StatusForbidden, "Permission denied"},
		{CodeInsufficientScope, http.StatusForbidden, "Insufficient scope"},
	}},
	{connect.CodeNotFound, http.StatusNotFound, []row{
		{CodeNotFound, http.StatusNotFound, "Not found"},
	}},
	{connect.CodeFailedPrecondition, http.StatusBadRequest, []row{
		{CodeFailedPrecondition, http.StatusConflict, "Conflict with the current state"},
		{CodePreconditionFailed, http.StatusPreconditionFailed, "Precondition failed"},
		{CodeIdempotencyMismatch, http.StatusUnprocessableEntity, "Idempotency-Key reused with a different request"},
		{CodeSecretRetired, http.StatusConflict, "The secret this request answered is retired"},
		{CodeContactHasLeads, http.StatusConflict, "Contact has leads"},
		{CodeKeyInUse, http.StatusConflict, "Key in use"},
		{CodeOptionInUse, http.StatusConflict, "Option in use"},
		{CodeLimitExceeded, http.StatusUnprocessableEntity, "Limit exceeded"},
		{CodeCursorExpired, http.StatusGone, "Cursor expired"},
	}},
	{connect.CodeAlreadyExists, http.StatusConflict, []row{
		{CodeDuplicate, http.StatusConflict, "Duplicate record"},
	}},
	{connect.CodeAborted, http.StatusConflict, []row{
		{CodeIdempotencyInFlight, http.StatusConflict, "Request with this Idempotency-Key in progress"},
	}},
	{connect.CodeUnimplemented, http.StatusNotImplemented, []row{
		{CodeMethodNotAllowed, http.StatusMethodNotAllowed, "Method not allowed"},
	}},
	{connect.CodeResourceExhausted, http.StatusTooManyRequests, []row{
		{CodeRateLimited, http.StatusTooManyRequests, "Too many requests"},
		{CodePayloadTooLarge, http.StatusRequestEntityTooLarge, "Payload too large"},
	}},
	{connect.CodeInternal, http.StatusInternalServerError, []row{
		{CodeInternal, http.StatusInternalServerError, "Internal error"},
		{CodeServerError, http.StatusInternalServerError, "Server error"},
	}},
	{connect.CodeUnavailable, http.StatusServiceUnavailable, []row{
		{CodeUnavailable, http.StatusServiceUnavailable, "Service unavailable"},
	}},
	{connect.CodeCanceled, 499, nil},
	{connect.CodeUnknown, http.StatusInternalServerError, nil},
	{connect.CodeDeadlineExceeded, http.StatusGatewayTimeout, nil},
	{connect.CodeOutOfRange, http.StatusBadRequest, nil},
	{connect.CodeDataLoss, http.StatusInternalServerError, nil},
}

// entry is what the table says of one problem code.
type entry struct {
	row
	rpc connect.Code
}

// byCode and byRPC index the table.
var (
	byCode = map[string]entry{}
	byRPC  = map[connect.Code]struct {
		status int
		code   string
	}{}
)

func init() {
	for _, t := range table {
		for _, r := range t.codes {
			byCode[r.code] = entry{r, t.rpc}
		}
	}
	for _, t := range table {
		stand := CodeInternal
	search:
		for _, u := range table {
			for _, r := range u.codes {
				if r.status == t.status {
					stand = r.code
					break search
				}
			}
		}
		byRPC[t.rpc] = struct {
			status int
			code   string
		}{t.status, stand}
	}
}

// Domain values of ErrorInfo.
const (
	DomainOAuth = "oauth2"
	DomainAPI   = "partner-api"
)

var oauthCodes = map[string]bool{
	CodeInvalidRequest: true, CodeInvalidClient: true, CodeUnsupportedGrantType: true,
	CodeInvalidScope: true, CodeServerError: true,
}

// IsOAuthCode reports whether code is one of the RFC 6749 §5.2 codes the
// token endpoint uses.
func IsOAuthCode(code string) bool { return oauthCodes[code] }

// FieldViolation is one invalid field.
type FieldViolation struct {
	// Field is the JSON path, e.g. "email" or "contact.phone".
	Field string `json:"field"`
	// Code is machine-readable, e.g. "required", "too_long", "invalid_format".
	Code string `json:"code"`
	// Message is for humans.
	Message string `json:"message"`
}

// Error is a domain error with a machine-readable code.
type Error struct {
	// Code selects the HTTP status, the RPC code and the title.
	Code string
	// Message is safe to show to the caller.
	Message string
	// Fields lists invalid fields of a validation error.
	Fields []FieldViolation
	// ExistingID names the record a duplicate collides with.
	ExistingID string
	// LeadCount is how many leads hold a contact that cannot be deleted
	// (contact_has_leads); 0 is absent.
	LeadCount int32
	// RecordCount is how many records hold an option a custom field
	// update would remove (option_in_use); 0 is absent.
	RecordCount int32
	// Challenge is a WWW-Authenticate value.
	Challenge string
	// Scope is the scope an insufficient_scope error needed.
	Scope string
	// RetryAfter is the seconds value of Retry-After, when set; over RPC it
	// also becomes a google.rpc.RetryInfo detail.
	RetryAfter string
	// Header holds further response headers (e.g. RateLimit).
	Header http.Header
	// Cause is logged, never shown.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Code + ": " + e.Message + ": " + e.Cause.Error()
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// New returns an error with a code and a message.
func New(code, message string) *Error { return &Error{Code: code, Message: message} }

// Validation returns a 422 validation error for the given fields.
func Validation(fields ...FieldViolation) *Error {
	msg := "the request has invalid fields"
	if len(fields) == 1 {
		msg = fields[0].Field + ": " + fields[0].Message
	}
	return &Error{Code: CodeValidationFailed, Message: msg, Fields: fields}
}

// Malformed returns a 400 for input that cannot be parsed.
func Malformed(message string) *Error { return New(CodeMalformedRequest, message) }

// Internal hides cause behind a generic message.
func Internal(cause error) *Error {
	return &Error{Code: CodeInternal, Message: "the server could not process the request", Cause: cause}
}

// BearerChallenge builds an RFC 6750 §3 WWW-Authenticate value.
func BearerChallenge(errCode, description, scope string) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="` + Realm + `"`)
	if errCode != "" {
		b.WriteString(`, error="` + errCode + `"`)
	}
	if description != "" {
		b.WriteString(`, error_description="` + description + `"`)
	}
	if scope != "" {
		b.WriteString(`, scope="` + scope + `"`)
	}
	return b.String()
}

// BasicChallenge is the WWW-Authenticate value of the token endpoint.
const BasicChallenge = `Basic realm="` + Realm + `"`

// HTTPStatus is the REST status of a code.
func HTTPStatus(code string) int {
	if r, ok := byCode[code]; ok {
		return r.status
	}
	return http.StatusInternalServerError
}

// Title is the problem title of a code.
func Title(code string) string {
	if r, ok := byCode[code]; ok {
		return r.title
	}
	return http.StatusText(HTTPStatus(code))
}

// RPCStatus is the HTTP status of an RPC code as google.api.http gives
// it: the status of an error answered as a google.rpc.Status (the admin
// API's REST errors), and of an error that carries no code of ours.
func RPCStatus(c connect.Code) int {
	if r, ok := byRPC[c]; ok {
		return r.status
	}
	return http.StatusInternalServerError
}

// Standing is the problem code that stands for an RPC error carrying no
// code of ours (the RPC framework's own, a cancelled call), answered
// with [RPCStatus]: the first code of that status in the table.
func Standing(c connect.Code) string {
	if r, ok := byRPC[c]; ok {
		return r.code
	}
	return CodeInternal
}

// ToConnect converts any handler error into a Connect error. Errors that
// are not domain errors become CodeInternal with no detail; the caller logs
// them.
func ToConnect(err error) *connect.Error {
	var cerr *connect.Error
	if errors.As(err, &cerr) {
		return cerr
	}
	if errors.Is(err, context.Canceled) {
		return connect.NewError(connect.CodeCanceled, errors.New("request canceled"))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("deadline exceeded"))
	}
	var e *Error
	if !errors.As(err, &e) {
		e = Internal(err)
	}
	r, ok := byCode[e.Code]
	if !ok {
		r = byCode[CodeInternal]
	}
	out := connect.NewError(r.rpc, errors.New(e.Code+": "+e.Message))
	domain := DomainAPI
	if oauthCodes[e.Code] {
		domain = DomainOAuth
	}
	info := &errdetails.ErrorInfo{Reason: e.Code, Domain: domain}
	if e.ExistingID != "" || e.Scope != "" || e.LeadCount != 0 || e.RecordCount != 0 {
		info.Metadata = map[string]string{}
		if e.ExistingID != "" {
			info.Metadata["existingId"] = e.ExistingID
		}
		if e.LeadCount != 0 {
			info.Metadata["leadCount"] = strconv.Itoa(int(e.LeadCount))
		}
		if e.RecordCount != 0 {
			info.Metadata["recordCount"] = strconv.Itoa(int(e.RecordCount))
		}
		if e.Scope != "" {
			info.Metadata["scope"] = e.Scope
		}
	}
	if d, err := connect.NewErrorDetail(info); err == nil {
		out.AddDetail(d)
	}
	if len(e.Fields) > 0 {
		br := &errdetails.BadRequest{}
		for _, f := range e.Fields {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
				Field: f.Field, Reason: f.Code, Description: f.Message,
			})
		}
		if d, err := connect.NewErrorDetail(br); err == nil {
			out.AddDetail(d)
		}
	}
	if e.Challenge != "" {
		out.Meta().Set("WWW-Authenticate", e.Challenge)
	}
	if e.RetryAfter != "" {
		out.Meta().Set("Retry-After", e.RetryAfter)
		if secs, err := strconv.Atoi(e.RetryAfter); err == nil {
			if d, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(secs) * time.Second)}); err == nil {
				out.AddDetail(d)
			}
		}
	}
	for k, v := range e.Header {
		out.Meta()[k] = v
	}
	return out
}

// FromConnect rebuilds a domain error from the details of a Connect
// error, as [ToConnect] put them there: the REST gateway gets its calls'
// errors back this way. ok is false when the error carries no ErrorInfo
// of ours.
func FromConnect(ce *connect.Error) (e *Error, ok bool) {
	details := make([]proto.Message, 0, len(ce.Details()))
	for _, d := range ce.Details() {
		if msg, err := d.Value(); err == nil {
			details = append(details, msg)
		}
	}
	return fromDetails(ce.Message(), details)
}

func fromDetails(message string, details []proto.Message) (e *Error, ok bool) {
	e = &Error{}
	for _, msg := range details {
		switch d := msg.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() != DomainAPI && d.GetDomain() != DomainOAuth {
				continue
			}
			ok = true
			e.Code = d.GetReason()
			e.ExistingID = d.GetMetadata()["existingId"]
			e.Scope = d.GetMetadata()["scope"]
			if n, err := strconv.Atoi(d.GetMetadata()["leadCount"]); err == nil {
				e.LeadCount = int32(n)
			}
			if n, err := strconv.Atoi(d.GetMetadata()["recordCount"]); err == nil {
				e.RecordCount = int32(n)
			}
		case *errdetails.RetryInfo:
			secs := (d.GetRetryDelay().AsDuration() + time.Second - 1) / time.Second
			e.RetryAfter = strconv.Itoa(max(1, int(secs)))
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				e.Fields = append(e.Fields, FieldViolation{Field: v.GetField(), Code: v.GetReason(), Message: v.GetDescription()})
			}
		}
	}
	e.Message = message
	if ok {
		e.Message = strings.TrimPrefix(e.Message, e.Code+": ")
	}
	return e, ok
}

// ProblemType is the "type" URI of a problem code. The codes are listed in
// docs/api.md.
func ProblemType(code string) string { return "urn:partner-api:problem:" + code }

// Problem renders e as the problem object the REST layer would answer for
// it, for a batch result that carries one per failed item.
func (e *Error) Problem(requestID string) *problemv1.Problem {
	p := &problemv1.Problem{
		Type: ProblemType(e.Code), Title: Title(e.Code), Status: int32(HTTPStatus(e.Code)),
		Detail: e.Message, Code: e.Code, RequestId: requestID, Errors: []*problemv1.FieldViolation{},
	}
	if e.ExistingID != "" {
		p.ExistingId = &e.ExistingID
	}
	if e.LeadCount != 0 {
		p.LeadCount = &e.LeadCount
	}
	if e.RecordCount != 0 {
		p.RecordCount = &e.RecordCount
	}
	for _, f := range e.Fields {
		p.Errors = append(p.Errors, &problemv1.FieldViolation{Field: f.Field, Code: f.Code, Message: f.Message})
	}
	return p
}
