package apierror_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
)

// failing answers GetContact with the error it holds.
type failing struct {
	contactv1connect.UnimplementedContactServiceHandler
	err error
}

func (f failing) GetContact(context.Context, *connect.Request[contactv1.GetContactRequest]) (*connect.Response[contactv1.GetContactResponse], error) {
	return nil, f.err
}

func serve(t *testing.T, err error) *httptest.Server {
	t.Helper()
	path, h := contactv1connect.NewContactServiceHandler(failing{err: err})
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestDomainErrorOverTheWire: an *Error a handler returns through
// ToConnect reaches a Connect client over HTTP with the RPC code of its
// row, the challenge and Retry-After as headers, and comes back whole
// from the details (FromConnect): code, message, fields, existing id and
// retry delay.
func TestDomainErrorOverTheWire(t *testing.T) {
	t.Parallel()
	for _, e := range []*apierror.Error{
		apierror.Validation(apierror.FieldViolation{Field: "email", Code: "invalid_format", Message: "must be an email address"}),
		{Code: apierror.CodeDuplicate, Message: "a contact has this email", ExistingID: "con_1"},
		{Code: apierror.CodeInvalidToken, Message: "the access token is invalid", Challenge: apierror.BearerChallenge(apierror.CodeInvalidToken, "", "")},
		{Code: apierror.CodeRateLimited, Message: "slow down", RetryAfter: "7"},
		{Code: apierror.CodeInsufficientScope, Message: "needs contacts:write", Scope: "contacts:write"},
	} {
		srv := serve(t, apierror.ToConnect(e))
		client := contactv1connect.NewContactServiceClient(srv.Client(), srv.URL)
		_, err := client.GetContact(context.Background(), connect.NewRequest(&contactv1.GetContactRequest{Id: "con_1"}))
		var ce *connect.Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v", e.Code, err)
		}
		got, ok := apierror.FromConnect(ce)
		if !ok || got.Code != e.Code || got.Message != e.Message || got.ExistingID != e.ExistingID || got.Scope != e.Scope ||
			got.RetryAfter != e.RetryAfter || len(got.Fields) != len(e.Fields) {
			t.Errorf("%s: came back as %+v (ok %v), sent %+v", e.Code, got, ok, e)
		}
		if want := apierror.ToConnect(e).Code(); ce.Code() != want {
			t.Errorf("%s: RPC code %v, want %v", e.Code, ce.Code(), want)
		}
		if e.Challenge != "" && ce.Meta().Get("WWW-Authenticate") != e.Challenge {
			t.Errorf("%s: WWW-Authenticate %q", e.Code, ce.Meta().Get("WWW-Authenticate"))
		}
		if e.RetryAfter != "" && ce.Meta().Get("Retry-After") != e.RetryAfter {
			t.Errorf("%s: Retry-After %q", e.Code, ce.Meta().Get("Retry-After"))
		}
	}
}

// TestInternalErrorsSayNothing: an error that is not a domain error is an
// internal error over the wire, with the generic message and no trace of
// its cause, in the Connect protocol's status and body.
func TestInternalErrorsSayNothing(t *testing.T) {
	t.Parallel()
	srv := serve(t, apierror.ToConnect(errors.New("pq: relation \"contact\" does not exist")))
	req, _ := http.NewRequest(http.MethodPost, srv.URL+contactv1connect.ContactServiceGetContactProcedure, strings.NewReader(`{"id":"con_1"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusInternalServerError || strings.Contains(string(b), "relation") ||
		!strings.Contains(string(b), `"code":"internal"`) || !strings.Contains(string(b), "internal_error: the server could not process the request") {
		t.Fatalf("%d %s", res.StatusCode, b)
	}
}

// TestOneTable: every code has its status, title and RPC code from the
// one table; every RPC code has google.api.http's HTTP status; an error
// with no code of ours stands in as the first code of that status.
func TestOneTable(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]struct {
		status int
		rpc    connect.Code
	}{
		apierror.CodeMalformedRequest:    {400, connect.CodeInvalidArgument},
		apierror.CodeValidationFailed:    {422, connect.CodeInvalidArgument},
		apierror.CodeInvalidClient:       {401, connect.CodeUnauthenticated},
		apierror.CodeInsufficientScope:   {403, connect.CodePermissionDenied},
		apierror.CodeDuplicate:           {409, connect.CodeAlreadyExists},
		apierror.CodeIdempotencyInFlight: {409, connect.CodeAborted},
		apierror.CodeIdempotencyMismatch: {422, connect.CodeFailedPrecondition},
		apierror.CodeSecretRetired:       {409, connect.CodeFailedPrecondition},
		apierror.CodeFailedPrecondition:  {409, connect.CodeFailedPrecondition},
		apierror.CodePreconditionFailed:  {412, connect.CodeFailedPrecondition},
		apierror.CodeMethodNotAllowed:    {405, connect.CodeUnimplemented},
		apierror.CodePayloadTooLarge:     {413, connect.CodeResourceExhausted},
		apierror.CodeRateLimited:         {429, connect.CodeResourceExhausted},
		apierror.CodeUnavailable:         {503, connect.CodeUnavailable},
	} {
		if s := apierror.HTTPStatus(code); s != want.status {
			t.Errorf("HTTPStatus(%s) = %d, want %d", code, s, want.status)
		}
		if c := apierror.ToConnect(apierror.New(code, "x")).Code(); c != want.rpc {
			t.Errorf("RPC code of %s = %v, want %v", code, c, want.rpc)
		}
		if apierror.Title(code) == "" {
			t.Errorf("%s has no title", code)
		}
	}
	if s := apierror.HTTPStatus("no_such_code"); s != 500 {
		t.Errorf("unknown code: %d", s)
	}
	for c, want := range map[connect.Code]struct {
		status int
		code   string
	}{
		connect.CodeCanceled:           {499, apierror.CodeInternal},
		connect.CodeUnknown:            {500, apierror.CodeInternal},
		connect.CodeInvalidArgument:    {400, apierror.CodeMalformedRequest},
		connect.CodeDeadlineExceeded:   {504, apierror.CodeInternal},
		connect.CodeNotFound:           {404, apierror.CodeNotFound},
		connect.CodeAlreadyExists:      {409, apierror.CodeFailedPrecondition},
		connect.CodePermissionDenied:   {403, apierror.CodePermissionDenied},
		connect.CodeResourceExhausted:  {429, apierror.CodeRateLimited},
		connect.CodeFailedPrecondition: {400, apierror.CodeMalformedRequest},
		connect.CodeAborted:            {409, apierror.CodeFailedPrecondition},
		connect.CodeOutOfRange:         {400, apierror.CodeMalformedRequest},
		connect.CodeUnimplemented:      {501, apierror.CodeInternal},
		connect.CodeInternal:           {500, apierror.CodeInternal},
		connect.CodeUnavailable:        {503, apierror.CodeUnavailable},
		connect.CodeDataLoss:           {500, apierror.CodeInternal},
		connect.CodeUnauthenticated:    {401, apierror.CodeUnauthenticated},
	} {
		if s, code := apierror.RPCStatus(c), apierror.Standing(c); s != want.status || code != want.code {
			t.Errorf("%v: status %d, standing %s; want %d %s", c, s, code, want.status, want.code)
		}
	}
}
