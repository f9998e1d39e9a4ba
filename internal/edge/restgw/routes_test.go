package restgw

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/internal/edge/requestid"
)

func service(t *testing.T, name string) protoreflect.ServiceDescriptor {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		t.Fatal(err)
	}
	return d.(protoreflect.ServiceDescriptor)
}

func TestMuxPattern(t *testing.T) {
	t.Parallel()
	for template, want := range map[string]string{
		"/api/v1/contacts":            "/api/v1/contacts",
		"/api/v1/contacts/{id}":       "/api/v1/contacts/{id}",
		"/api/v1/contacts/{id=*}":     "/api/v1/contacts/{id}",
		"/api/v1/leads/{lead.id}":     "/api/v1/leads/{lead_id}",
		"/v1/files/{name=**}":         "/v1/files/{name...}",
		"/v1/*/things/*":              "/v1/{_1}/things/{_2}",
		"/v1/shelves/{shelf}/books/*": "/v1/shelves/{shelf}/books/{_1}",
	} {
		if got := muxPattern(template); got != want {
			t.Errorf("muxPattern(%q) = %q, want %q", template, got, want)
		}
	}
	for _, bad := range []string{"/v1/things:batchGet", "/v1/{name=shelves/*}", "v1/x", "/v1/a{b}", "/v1/**/x"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("muxPattern(%q) did not panic", bad)
				}
			}()
			muxPattern(bad)
		}()
	}
}

// TestRoutesFromAnnotations: requests reach the transcoder (here a handler
// that records what it got) by their google.api.http templates, {id}
// included; the route template, never the raw path, is recorded for logs
// and metrics; unknown paths are 404 and other methods 405 with Allow.
func TestRoutesFromAnnotations(t *testing.T) {
	t.Parallel()
	var got *http.Request
	transcoder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.WriteHeader(http.StatusOK)
	})
	g := New(transcoder, service(t, contactv1connect.ContactServiceName), service(t, leadv1connect.LeadServiceName))
	for _, tc := range []struct {
		method, target, ctype, body string
		status                      int
		route, allow, query         string
	}{
		{"GET", "/api/v1/contacts/con_abc", "", "", 200, "/api/v1/contacts/{id}", "", ""},
		{"GET", "/api/v1/leads/lea_abc", "", "", 200, "/api/v1/leads/{id}", "", ""},
		{"GET", "/api/v1/contacts?limit=5", "", "", 200, "/api/v1/contacts", "", "limit=5"},
		{"POST", "/api/v1/contacts", "application/json", `{"email":"a@b.co"}`, 201, "/api/v1/contacts", "", ""},
		{"POST", "/api/v1/leads/batch", "application/json", `{"leads":[]}`, 200, "/api/v1/leads/batch", "", ""},
		{"PATCH", "/api/v1/contacts/con_abc", "application/merge-patch+json", `{"firstName":"A","phone":null}`, 200, "/api/v1/contacts/{id}", "", "updateMask=firstName%2Cphone"},
		{"PATCH", "/api/v1/leads/lea_abc", "application/json", `{"status":"new","value":{"amount":1}}`, 200, "/api/v1/leads/{id}", "", "updateMask=status%2Cvalue.amount"},
		{"PATCH", "/api/v1/leads/lea_abc", "application/json", `{}`, 200, "/api/v1/leads/{id}", "", ""},
		{"PATCH", "/api/v1/leads/lea_abc", "application/json", `[1]`, 400, "/api/v1/leads/{id}", "", ""},
		{"PATCH", "/api/v1/leads/lea_abc", "text/plain", `{}`, 415, "/api/v1/leads/{id}", "", ""},
		{"POST", "/api/v1/leads/batch", "application/merge-patch+json", `{}`, 415, "/api/v1/leads/batch", "", ""},
		{"PATCH", "/api/v1/leads/lea_abc?updateMask=title", "application/json", `{}`, 400, "/api/v1/leads/{id}", "", ""},
		{"GET", "/api/v1/contacts/con_abc?id=x", "", "", 400, "/api/v1/contacts/{id}", "", ""},
		{"DELETE", "/api/v1/leads/lea_abc", "", "", 405, "/api/v1/leads/{id}", "GET, PATCH", ""},
		{"GET", "/api/v1/contacts/batch", "", "", 405, "/api/v1/contacts/batch", "POST", ""},
		{"PUT", "/api/v1/contacts", "", "", 405, "/api/v1/contacts", "GET, POST", ""},
		{"GET", "/api/v1/contacts/con_abc/notes", "", "", 404, "unmatched", "", ""},
		{"GET", "/api/v1/nope", "", "", 404, "unmatched", "", ""},
	} {
		got = nil
		ctx := requestid.WithID(context.Background(), "req_test")
		r := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body)).WithContext(ctx)
		if tc.ctype != "" {
			r.Header.Set("Content-Type", tc.ctype)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		name := tc.method + " " + tc.target
		if w.Code != tc.status {
			t.Errorf("%s: status %d, want %d: %s", name, w.Code, tc.status, w.Body)
		}
		if route := requestid.InfoFrom(ctx).Route; route != tc.route {
			t.Errorf("%s: route %q, want %q", name, route, tc.route)
		}
		if allow := w.Header().Get("Allow"); allow != tc.allow {
			t.Errorf("%s: Allow %q, want %q", name, allow, tc.allow)
		}
		if reached := tc.status < 300; reached != (got != nil) {
			t.Errorf("%s: reached the transcoder: %v, want %v", name, got != nil, reached)
		}
		if got != nil {
			if q, _ := url.QueryUnescape(got.URL.RawQuery); got.URL.RawQuery != tc.query {
				t.Errorf("%s: query %q (%s), want %q", name, got.URL.RawQuery, q, tc.query)
			}
			if got.Method != http.MethodGet && got.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s: Content-Type %q reached the transcoder", name, got.Header.Get("Content-Type"))
			}
		}
		if w.Code >= 400 && w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: error Content-Type %q", name, w.Header().Get("Content-Type"))
		}
	}
}
