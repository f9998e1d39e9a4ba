package servertest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
)

// The helpers below were written again in each test file that needed
// them (decode, mustUnmarshal, ptr three times, the Connect error checks);
// every test package of a handler uses these instead.

// Decode parses a JSON body into a map, failing the test on bad JSON.
func Decode(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, body)
	}
	return m
}

// ID is the "id" of a created record's JSON body. A body without one (the
// create failed: a 503 while the database is down, a 422) fails the test
// with the answer it got, instead of panicking on a type assertion.
func ID(t testing.TB, body []byte) string {
	t.Helper()
	id, ok := Decode(t, body)["id"].(string)
	if !ok || id == "" {
		t.Fatalf("no record id in the answer: %s", body)
	}
	return id
}

// MustUnmarshal parses JSON into v, failing the test on bad JSON.
func MustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("bad JSON: %v: %s", err, b)
	}
}

// SameJSON reports whether two JSON documents are equal as values.
func SameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	MustUnmarshal(t, a, &x)
	MustUnmarshal(t, b, &y)
	return reflect.DeepEqual(x, y)
}

// Ptr points at a copy of v, for the optional fields of proto messages.
func Ptr[T any](v T) *T { return &v }

// Long is a string of n letters, for the length limits of fields.
func Long(n int) string { return strings.Repeat("z", n) }

// HasViolation reports whether a problem's errors name field.
func HasViolation(p map[string]any, field string) bool {
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		if e.(map[string]any)["field"] == field {
			return true
		}
	}
	return false
}

// WithoutRequestID is a problem object without the one member that
// differs between two requests that fail the same way.
func WithoutRequestID(t testing.TB, p any) map[string]any {
	t.Helper()
	m, ok := p.(map[string]any)
	if !ok {
		t.Fatalf("not a problem object: %v", p)
	}
	out := map[string]any{}
	for k, v := range m {
		if k != "requestId" {
			out[k] = v
		}
	}
	return out
}

// BatchResults is the answer of a batch create over REST.
type BatchResults struct {
	Results []struct {
		Contact map[string]any `json:"contact"`
		Lead    map[string]any `json:"lead"`
		Error   map[string]any `json:"error"`
	} `json:"results"`
}

// Page is one page of a contact or lead list over REST: the ids and the
// cursors.
type Page struct {
	Contacts []struct {
		ID string `json:"id"`
	} `json:"contacts"`
	Leads []struct {
		ID string `json:"id"`
	} `json:"leads"`
	Pagination struct {
		NextCursor *string `json:"nextCursor"`
		SyncCursor *string `json:"syncCursor"`
	} `json:"pagination"`
}

// ContainsID reports whether a list page holds the record id.
func ContainsID(t testing.TB, body []byte, id string) bool {
	t.Helper()
	var p Page
	MustUnmarshal(t, body, &p)
	for _, l := range p.Leads {
		if l.ID == id {
			return true
		}
	}
	for _, c := range p.Contacts {
		if c.ID == id {
			return true
		}
	}
	return false
}

// AssertConnectError checks the code, the reason in ErrorInfo and that
// the reason leads the message.
func AssertConnectError(t testing.TB, err error, code connect.Code, reason string) *connect.Error {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v, want a Connect error %v", err, code)
	}
	if ce.Code() != code {
		t.Fatalf("code = %v, want %v (%v)", ce.Code(), code, ce)
	}
	if !strings.HasPrefix(ce.Message(), reason+": ") {
		t.Errorf("message = %q, want it to start with %q", ce.Message(), reason)
	}
	found := false
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if info, ok := v.(*errdetails.ErrorInfo); ok {
			found = true
			if info.GetReason() != reason {
				t.Errorf("ErrorInfo.reason = %q, want %q", info.GetReason(), reason)
			}
		}
	}
	if !found {
		t.Errorf("no ErrorInfo detail in %v", ce)
	}
	return ce
}

// ErrorInfo is the ErrorInfo detail of a Connect error, or nil.
func ErrorInfo(ce *connect.Error) *errdetails.ErrorInfo {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok {
				return info
			}
		}
	}
	return nil
}

// BadRequest is the BadRequest detail of a Connect error, or nil.
func BadRequest(ce *connect.Error) *errdetails.BadRequest {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if br, ok := v.(*errdetails.BadRequest); ok {
				return br
			}
		}
	}
	return nil
}

// Bearer is a client interceptor that sends token as a bearer token.
func Bearer(token string) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	})
}

// BasicHeader is the Authorization value of HTTP Basic for an API client,
// its id and secret form-encoded as RFC 6749 §2.3.1 asks.
func BasicHeader(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

// AdminClientWithoutToken talks Connect to the admin listener without any
// token, for the tests of the admin token itself.
func (h *Harness) AdminClientWithoutToken() adminv1connect.AdminServiceClient {
	return adminv1connect.NewAdminServiceClient(h.Admin.Client(), h.Admin.URL)
}

// QueryRow runs one query on a connection of its own to the database at
// url, for tests that look at a database the harness did not open.
func QueryRow(ctx context.Context, url, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", "database", err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, sql).Scan(dest...); err != nil {
		return fmt.Errorf("query row: %w", err)
	}
	return nil
}

// AssertField checks that a Connect error's BadRequest detail names field
// first; name says which call the test made.
func AssertField(t testing.TB, name string, ce *connect.Error, field string) {
	t.Helper()
	if br := BadRequest(ce); br != nil && len(br.GetFieldViolations()) > 0 && br.GetFieldViolations()[0].GetField() == field {
		return
	}
	t.Errorf("%s: no BadRequest violation naming %q in %v", name, field, ce)
}

// APIError is the API error in err, for tests that call a handler
// directly; it fails the test when err is none.
func APIError(t testing.TB, err error) *apierror.Error {
	t.Helper()
	var e *apierror.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an API error", err)
	}
	return e
}
