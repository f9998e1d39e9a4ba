package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/edge/gate"
	"github.com/svat/partnerapi/internal/observe/requestid"
)

// TestConnectRefusalIsNotHTMLEscaped: a refusal written in the Connect
// protocol reads as written ("Bearer <token>"), as the REST problem does,
// not with encoding/json's \u003c escapes (issue 24, item 5); it still
// decodes to the same message, an escaped backslash before "u003c"
// included, and the Connect client still reads the code and message.
// Before, the raw body held "Bearer \u003ctoken\u003e".
func TestConnectRefusalIsNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	const msg = `send an access token in the Authorization header: Bearer <token> & more; a literal \u003c stays`
	srv := httptest.NewServer(requestid.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gate.WriteError(w, r, &apierror.Error{Code: apierror.CodeUnauthenticated, Message: msg})
	})))
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/"+contactv1connect.ContactServiceName+"/ListContacts", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 401 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("Connect refusal: %d %v %s", res.StatusCode, res.Header, b)
	}
	if !bytes.Contains(b, []byte("Bearer <token> & more")) || bytes.Contains(b, []byte(`\u003ctoken`)) || bytes.Contains(b, []byte(`\u0026`)) {
		t.Errorf("Connect refusal body is HTML-escaped: %s", b)
	}
	var wire struct{ Code, Message string }
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatalf("Connect refusal is not JSON: %v\n%s", err, b)
	}
	if wire.Code != "unauthenticated" || !strings.HasSuffix(wire.Message, msg) {
		t.Errorf("Connect refusal decodes to %+v; want unauthenticated and %q", wire, msg)
	}

	// The generated client reads it as before.
	client := contactv1connect.NewContactServiceClient(http.DefaultClient, srv.URL)
	_, err = client.ListContacts(context.Background(), connect.NewRequest(&contactv1.ListContactsRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.HasSuffix(err.Error(), msg) {
		t.Errorf("Connect client: %v", err)
	}

	// gRPC-Web carries the message in a trailer, percent-encoded: unchanged.
	web := contactv1connect.NewContactServiceClient(srv.Client(), srv.URL, connect.WithGRPCWeb())
	_, err = web.ListContacts(context.Background(), connect.NewRequest(&contactv1.ListContactsRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.HasSuffix(err.Error(), msg) {
		t.Errorf("gRPC-Web client: %v", err)
	}
}
