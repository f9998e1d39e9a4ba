package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// TestGRPCFailuresAreVisible: a gRPC call that fails is an HTTP 200, so
// its code is logged (rpc_code) and is a label of the request metric
// (rpc_grpc_status_code, the number), for a handler's refusal and for
// the gate's alike; a success is "ok" / 0, and a REST call carries
// neither. The token endpoint's refusals of a wrong Authorization header
// are named and counted (issue 24, item 7). Before, the gRPC
// InvalidArgument was logged and counted as a bare 200, and a non-Basic
// Authorization on the token endpoint was logged as "invalid_client",
// which no metric counted.
func TestGRPCFailuresAreVisible(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := servertest.New(t, servertest.Options{Config: func(c *server.Config) {
		c.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	}})
	tn := h.NewTenant("Visible Co")
	ctx := context.Background()
	contacts := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithGRPC(), connect.WithInterceptors(bearerInterceptor(tn.Token)))
	_, err := contacts.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: ptr("not-an-email")}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("gRPC CreateContact of a bad email: %v", err)
	}
	if _, err := contacts.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{})); err != nil {
		t.Fatal(err)
	}
	anon := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithGRPC())
	if _, err := anon.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("anonymous gRPC ListContacts: %v", err)
	}
	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts", tn.Token, "", ""); s != 200 {
		t.Fatalf("REST list: %d %s", s, b)
	}
	form := url.Values{"grant_type": {"client_credentials"}}.Encode()
	if s, _, b := h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded", form, "Authorization", "Bearer abc"); s != 401 {
		t.Fatalf("token endpoint with a Bearer header: %d %s", s, b)
	}
	if s, _, b := h.Do(http.MethodPost, "/api/oauth/token", "", "application/x-www-form-urlencoded", form, "Authorization", "Basic !!!"); s != 401 {
		t.Fatalf("token endpoint with malformed Basic: %d %s", s, b)
	}

	byRoute := map[string][]map[string]any{}
	for _, l := range accessLines(t, &logs, "public") {
		byRoute[l["route"].(string)] = append(byRoute[l["route"].(string)], l)
	}
	create := byRoute["/partner.contact.v1.ContactService/CreateContact"]
	if len(create) != 1 || create[0]["status"] != float64(200) || create[0]["rpc_code"] != "invalid_argument" {
		t.Errorf("gRPC CreateContact log: %v; want status 200 and rpc_code invalid_argument", create)
	}
	codes := map[any]int{}
	for _, l := range byRoute["/partner.contact.v1.ContactService/ListContacts"] {
		codes[l["rpc_code"]]++
	}
	if codes["ok"] != 1 || codes["unauthenticated"] != 1 {
		t.Errorf("gRPC ListContacts log codes: %v; want one ok and one unauthenticated", codes)
	}
	for _, l := range byRoute["/api/v1/contacts"] {
		if _, ok := l["rpc_code"]; ok {
			t.Errorf("a REST line carries rpc_code: %v", l)
		}
	}
	reasons := map[any]int{}
	for _, l := range byRoute["/api/oauth/token"] {
		reasons[l["auth_failure"]]++
	}
	if reasons["unsupported_auth_scheme"] != 1 || reasons["malformed_credentials"] != 1 {
		t.Errorf("token endpoint refusals logged as %v; want unsupported_auth_scheme and malformed_credentials", reasons)
	}

	res, err := http.Get(h.Admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	text := string(b)
	for _, want := range []string{
		`http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="200",http_route="/partner.contact.v1.ContactService/CreateContact",rpc_grpc_status_code="3"}`,
		`http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="200",http_route="/partner.contact.v1.ContactService/ListContacts",rpc_grpc_status_code="16"}`,
		`http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="200",http_route="/partner.contact.v1.ContactService/ListContacts",rpc_grpc_status_code="0"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Both series exist from the start at zero: they must have counted.
	for _, reason := range []string{"unsupported_auth_scheme", "malformed_credentials"} {
		if !regexp.MustCompile(`(?m)^partner_auth_failures_total\{reason="` + reason + `"\} [1-9]`).MatchString(text) {
			t.Errorf("partner_auth_failures_total{reason=%q} did not count", reason)
		}
	}
}
