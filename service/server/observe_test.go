package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/svat/partnerapi/db/dbtest"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	identityv1 "github.com/svat/partnerapi/gen/partner/identity/v1"
	"github.com/svat/partnerapi/gen/partner/identity/v1/identityv1connect"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// traffic drives a mix of requests over REST, Connect and gRPC, successes
// and failures, and returns how many requests it sent to the public
// listener and the values that must never appear in a log or a label.
func traffic(t *testing.T, h *servertest.Harness) (requests int, secrets []string) {
	t.Helper()
	ws, m := h.Workspace("Observed Co")
	id, sec := h.Client(ws, m, "contacts:read", "contacts:write")
	tok := h.Token(id, sec, "")
	requests++
	do := func(method, path, token, contentType, body string) int {
		requests++
		status, _, _ := h.Do(method, path, token, contentType, body)
		return status
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}.Encode()
	for _, r := range []struct {
		method, path, token, ct, body string
		want                          int
	}{
		{"POST", "/api/oauth/token", "", "application/x-www-form-urlencoded", form, 200},
		{"POST", "/api/oauth/token", "", "application/x-www-form-urlencoded", "grant_type=client_credentials&client_id=" + id + "&client_secret=wrong", 401},
		{"GET", "/api/v1/me", tok, "", "", 200},
		{"GET", "/api/v1/me", tok, "", "", 200},
		{"GET", "/api/v1/me", "", "", "", 401},
		{"GET", "/api/v1/me", "svat_definitelynotavalidtoken", "", "", 401},
		{"GET", "/api/v1/leads", tok, "", "", 403},
		{"POST", "/api/v1/contacts", tok, "application/json", `{"email":"secret.person@example.com"}`, 201},
		{"GET", "/api/v1/contacts?email=secret.person%40example.com", tok, "", "", 200},
		{"GET", "/api/v1/contacts/con_01jd3xabcdefghjkmnpqrstvwx", tok, "", "", 404},
		{"GET", "/api/v1/nothing/con_01jd3xabcdefghjkmnpqrstvwx", tok, "", "", 404},
		{"GET", "/healthz", "", "", "", 200},
	} {
		if got := do(r.method, r.path, r.token, r.ct, r.body); got != r.want {
			t.Fatalf("%s %s: %d, want %d", r.method, r.path, got, r.want)
		}
	}
	// Connect and gRPC.
	bearer := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+tok)
			return next(ctx, req)
		}
	}))
	ctx := context.Background()
	if _, err := identityv1connect.NewIdentityServiceClient(h.Public.Client(), h.Public.URL, bearer).GetMe(ctx, connect.NewRequest(&identityv1.GetMeRequest{})); err != nil {
		t.Fatal(err)
	}
	requests++
	grpcContacts := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithGRPC(), bearer)
	if _, err := grpcContacts.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{})); err != nil {
		t.Fatal(err)
	}
	requests++
	// An unauthenticated gRPC call: its error must not carry
	// WWW-Authenticate as a trailer.
	anon := identityv1connect.NewIdentityServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithGRPC())
	if _, err := anon.GetMe(ctx, connect.NewRequest(&identityv1.GetMeRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("anonymous gRPC GetMe: %v", err)
	}
	requests++

	// One record by id, refusals by the body bound (REST and Connect) and
	// by the gate's rate limit (REST and Connect), gRPC-Web, health and
	// reflection.
	_, _, b := h.Do("GET", "/api/v1/contacts?email=secret.person%40example.com", tok, "", "")
	requests++
	var page struct {
		Contacts []struct{ ID string } `json:"contacts"`
	}
	mustUnmarshal(t, b, &page)
	if len(page.Contacts) != 1 {
		t.Fatalf("the contact is not listed: %s", b)
	}
	big := `{"email":"` + strings.Repeat("x", 1<<20) + `@example.com"}`
	for _, r := range []struct {
		method, path, ct, body string
		want                   int
	}{
		{"PATCH", "/api/v1/contacts/" + page.Contacts[0].ID, "application/merge-patch+json", `{"firstName":"Secretive"}`, 200},
		{"POST", "/api/v1/contacts", "application/json", big, 413},
	} {
		if got := do(r.method, r.path, tok, r.ct, r.body); got != r.want {
			t.Fatalf("%s %s: %d, want %d", r.method, r.path, got, r.want)
		}
	}
	if _, err := contactv1connect.NewContactServiceClient(h.Public.Client(), h.Public.URL, bearer).CreateContact(ctx,
		connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: &big}})); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("Connect CreateContact over 1 MiB: %v", err)
	}
	requests++
	slowID, slowSec := h.ClientWithRates(ws, m, 1, 0, "contacts:read")
	slow := h.Token(slowID, slowSec, "")
	requests++
	limited := 0
	for range 3 { // the burst is 2
		if do("GET", "/api/v1/contacts", slow, "", "") == http.StatusTooManyRequests {
			limited++
		}
	}
	slowBearer := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+slow)
			return next(ctx, req)
		}
	}))
	if _, err := contactv1connect.NewContactServiceClient(h.Public.Client(), h.Public.URL, slowBearer).ListContacts(ctx,
		connect.NewRequest(&contactv1.ListContactsRequest{})); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("Connect ListContacts past the read bucket: %v", err)
	}
	requests++
	if limited != 1 {
		t.Fatalf("%d of 3 reads were limited, want 1", limited)
	}
	if _, err := identityv1connect.NewIdentityServiceClient(h.Public.Client(), h.Public.URL, connect.WithGRPCWeb(), bearer).GetMe(ctx, connect.NewRequest(&identityv1.GetMeRequest{})); err != nil {
		t.Fatal(err)
	}
	requests++
	if got := do("POST", "/grpc.health.v1.Health/Check", "", "application/json", "{}"); got != 200 {
		t.Fatalf("health check over Connect: %d", got)
	}
	stream := grpcreflect.NewClient(h.HTTP2Client(), h.Public.URL).NewStream(ctx)
	if _, err := stream.ListServices(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	requests++
	return requests, []string{tok, sec, slow, slowSec, "secret.person", "Secretive", "example.com", "con_01jd3x", page.Contacts[0].ID, "svat_"}
}

// TestMetricsAndAccessLog: after traffic, /metrics on the admin listener
// (behind the admin token) has the request histogram by route template
// and procedure, the partner_* counters, the pool and the Go runtime; the
// access log has exactly one JSON line per request with its fields; and
// neither a label nor a log line holds a token, a secret, an email or a
// raw path with an id.
func TestMetricsAndAccessLog(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := servertest.New(t, servertest.Options{AdminToken: "admin-secret-token", Config: func(c *server.Config) {
		c.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	}})
	requests, secrets := traffic(t, h)

	// The access log: one line per public request, written before the
	// response completes.
	lines := accessLines(t, &logs, "public")
	if len(lines) != requests {
		t.Fatalf("%d access log lines for %d requests:\n%s", len(lines), requests, logs.String())
	}
	routes := map[string]int{}
	for _, l := range lines {
		for _, f := range []string{"request_id", "method", "route", "status", "duration_ms", "protocol"} {
			if _, ok := l[f]; !ok {
				t.Errorf("access log line without %s: %v", f, l)
			}
		}
		routes[l["route"].(string)]++
		if l["route"] == "/api/v1/me" && l["status"] == float64(200) && (l["client_id"] == nil || l["workspace_id"] == nil) {
			t.Errorf("an authenticated line lacks client_id or workspace_id: %v", l)
		}
		if l["status"] == float64(401) && l["route"] == "/api/v1/me" && l["auth_failure"] == nil {
			t.Errorf("a refused request lacks auth_failure: %v", l)
		}
	}
	for _, want := range []string{"/api/v1/me", "/api/oauth/token", "/api/v1/contacts", "/healthz", "unmatched",
		"/partner.identity.v1.IdentityService/GetMe", "/partner.contact.v1.ContactService/ListContacts",
		"/api/v1/contacts/{id}", "/partner.contact.v1.ContactService/CreateContact", "/grpc.health.v1.Health/Check",
		"/grpc.reflection.v1.ServerReflection/"} {
		if routes[want] == 0 {
			t.Errorf("no access log line with route %s (routes: %v)", want, routes)
		}
	}
	if !strings.Contains(logs.String(), `"auth_failure":"invalid_token"`) || !strings.Contains(logs.String(), `"auth_failure":"insufficient_scope"`) ||
		!strings.Contains(logs.String(), `"auth_failure":"wrong_secret"`) {
		t.Errorf("auth failures are not logged with their reasons:\n%s", logs.String())
	}

	// /metrics needs the admin token when one is set.
	scrape := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, h.Admin.URL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if status, _ := scrape(""); status != http.StatusUnauthorized {
		t.Fatalf("/metrics without the admin token: %d", status)
	}
	// Admin calls refused for the token are logged and counted by route,
	// with the reason; an unknown path stays unmatched.
	for _, path := range []string{"/partner.admin.v1.AdminService/CreateWorkspace", "/partner.admin.v1.AdminService/Nope"} {
		req, _ := http.NewRequest(http.MethodPost, h.Admin.URL+path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s without the admin token: %d", path, res.StatusCode)
		}
	}
	refused := map[string]bool{}
	for _, l := range accessLines(t, &logs, "admin") {
		if l["status"] == float64(401) && l["auth_failure"] == "admin_token" {
			refused[l["route"].(string)] = true
		}
	}
	if !refused["/metrics"] || !refused["/partner.admin.v1.AdminService/CreateWorkspace"] || !refused["unmatched"] || len(refused) != 3 {
		t.Errorf("admin 401s logged under routes %v", refused)
	}
	status, text := scrape("admin-secret-token")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	for _, want := range []string{
		`http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="200",http_route="/api/v1/me",rpc_grpc_status_code=""}`,
		`http_server_request_duration_seconds_bucket{http_request_method="POST",http_response_status_code="201",http_route="/api/v1/contacts",rpc_grpc_status_code="",le=`,
		`http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="200",http_route="/partner.contact.v1.ContactService/ListContacts",rpc_grpc_status_code="0"}`,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="404",http_route="unmatched",rpc_grpc_status_code=""}`,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="401",http_route="/metrics",rpc_grpc_status_code=""}`,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="404",http_route="/api/v1/contacts/{id}",rpc_grpc_status_code=""}`,
		`http_server_request_duration_seconds_count{http_request_method="PATCH",http_response_status_code="200",http_route="/api/v1/contacts/{id}",rpc_grpc_status_code=""}`,
		`http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="413",http_route="/api/v1/contacts",rpc_grpc_status_code=""}`,
		`http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="413",http_route="/partner.contact.v1.ContactService/CreateContact",rpc_grpc_status_code="8"}`,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="429",http_route="/api/v1/contacts",rpc_grpc_status_code=""}`,
		`http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="429",http_route="/partner.contact.v1.ContactService/ListContacts",rpc_grpc_status_code="8"}`,
		"partner_tokens_issued_total ",
		`partner_auth_failures_total{reason="invalid_token"}`,
		`partner_rate_limited_total{bucket="read"}`,
		"pgxpool_max_connections ", "pgxpool_acquires_total ",
		"go_goroutines ", "process_resident_memory_bytes ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if m := regexp.MustCompile(`(?m)^partner_tokens_issued_total (\d+)`).FindStringSubmatch(text); m == nil || m[1] == "0" {
		t.Errorf("partner_tokens_issued_total did not count the tokens: %v", m)
	}
	// HTTP/2 refuses WWW-Authenticate as a trailer; it must not be sent.
	if strings.Contains(logs.String(), "invalid trailer") {
		t.Errorf("the server dropped a trailer:\n%s", logs.String())
	}
	// The admin listener logs its requests too, as the admin listener.
	if len(accessLines(t, &logs, "admin")) == 0 {
		t.Error("admin requests are not logged")
	}

	// Nothing secret, personal or id-bearing in a label or a log line.
	labels := regexp.MustCompile(`\{[^}]*\}`).FindAllString(text, -1)
	all := logs.String() + "\n" + strings.Join(labels, "\n")
	for _, s := range append(secrets, "admin-secret-token", "@") {
		if strings.Contains(all, s) {
			t.Errorf("a log line or metric label contains %q", s)
		}
	}
}

// accessLines returns the access log lines of one listener.
func accessLines(t *testing.T, logs *syncBuffer, listener string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line is not JSON: %s", sc.Text())
		}
		if l["msg"] == "request" && l["listener"] == listener {
			out = append(out, l)
		}
	}
	return out
}

// TestTracing: with a tracer provider, every request is one root server
// span named by its route with the route and status as attributes; the
// RPC span and the database calls are its descendants.
func TestTracing(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := servertest.New(t, servertest.Options{Config: func(c *server.Config) { c.TracerProvider = tp }})
	tn := h.NewTenant("Traced Co")
	exp.Reset()

	status, _, _ := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"traced@example.com"}`,
		"Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if status != 201 {
		t.Fatalf("create: %d", status)
	}
	if status, _, _ := h.Do(http.MethodGet, "/api/v1/contacts?limit=5", tn.Token, "", ""); status != 200 {
		t.Fatalf("list: %d", status)
	}
	if status, _, _ := h.Do(http.MethodGet, "/api/v1/me", "", "", ""); status != 401 {
		t.Fatalf("me: %d", status)
	}
	spans := waitSpans(t, exp, 3)
	byID := map[trace.SpanID]tracetest.SpanStub{}
	var roots []tracetest.SpanStub
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
		if !s.Parent.IsValid() {
			roots = append(roots, s)
		}
	}
	if len(roots) != 3 {
		t.Fatalf("%d root spans for 3 requests: %v", len(roots), names(roots))
	}
	want := map[string]int{"POST /api/v1/contacts": 201, "GET /api/v1/contacts": 200, "GET /api/v1/me": 401}
	for _, r := range roots {
		code, ok := want[r.Name]
		if !ok || r.SpanKind != trace.SpanKindServer {
			t.Errorf("root span %q (%v)", r.Name, r.SpanKind)
			continue
		}
		attrs := map[string]any{}
		for _, a := range r.Attributes {
			attrs[string(a.Key)] = a.Value.AsInterface()
		}
		if attrs["http.route"] != strings.SplitN(r.Name, " ", 2)[1] || attrs["http.response.status_code"] != int64(code) {
			t.Errorf("span %s attributes %v", r.Name, attrs)
		}
		if r.Name == "POST /api/v1/contacts" {
			// The caller's trace is linked, not adopted.
			if len(r.Links) != 1 || r.Links[0].SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" ||
				r.SpanContext.TraceID() == r.Links[0].SpanContext.TraceID() {
				t.Errorf("the caller's trace context is not a link: %+v", r.Links)
			}
		}
	}
	rootOf := func(s tracetest.SpanStub) tracetest.SpanStub {
		for s.Parent.IsValid() {
			p, ok := byID[s.Parent.SpanID()]
			if !ok {
				break
			}
			s = p
		}
		return s
	}
	dbUnder := map[string]int{}
	rpcUnder := map[string]int{}
	for _, s := range spans {
		isDB := false
		for _, a := range s.Attributes {
			if a.Key == "db.system.name" {
				isDB = true
			}
		}
		root := rootOf(s)
		if root.SpanContext.SpanID() == s.SpanContext.SpanID() {
			continue
		}
		if isDB {
			if s.SpanKind != trace.SpanKindClient {
				t.Errorf("database span %s is %v", s.Name, s.SpanKind)
			}
			dbUnder[root.Name]++
		}
		if strings.HasPrefix(s.Name, "partner.") {
			rpcUnder[root.Name]++
		}
	}
	if dbUnder["POST /api/v1/contacts"] == 0 || dbUnder["GET /api/v1/contacts"] == 0 {
		t.Errorf("database spans under the requests: %v; spans: %v", dbUnder, names(spans))
	}
	if rpcUnder["POST /api/v1/contacts"] != 1 {
		t.Errorf("RPC spans under the create: %v", rpcUnder)
	}
}

// waitSpans waits up to 5 s for the exporter to hold roots root spans (a
// server span ends after its response is written) and returns the spans
// it holds; the caller checks them.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, roots int) tracetest.SpanStubs {
	t.Helper()
	var spans tracetest.SpanStubs
	dbtest.Until(5*time.Second, func() bool {
		spans = exp.GetSpans()
		n := 0
		for _, s := range spans {
			if !s.Parent.IsValid() {
				n++
			}
		}
		return n >= roots
	})
	return spans
}

func names(spans []tracetest.SpanStub) []string {
	out := make([]string, 0, len(spans))
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}
