package restgw

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/observe/requestid"
)

// contacts records the requests of the in-process calls and answers them.
type contacts struct {
	contactv1connect.UnimplementedContactServiceHandler
	mu     sync.Mutex // TestGzip calls ListContacts from several goroutines
	got    proto.Message
	header http.Header
}

func (c *contacts) ListContacts(_ context.Context, req *connect.Request[contactv1.ListContactsRequest]) (*connect.Response[contactv1.ListContactsResponse], error) {
	c.mu.Lock()
	c.got, c.header = req.Msg, req.Header()
	c.mu.Unlock()
	email := "a@b.co"
	return connect.NewResponse(&contactv1.ListContactsResponse{Contacts: []*contactv1.Contact{{Id: "con_1", Email: &email}}}), nil
}

func (c *contacts) GetContact(_ context.Context, req *connect.Request[contactv1.GetContactRequest]) (*connect.Response[contactv1.GetContactResponse], error) {
	c.got = req.Msg
	if req.Msg.GetId() == "con_missing" {
		return nil, apierror.ToConnect(&apierror.Error{Code: apierror.CodeNotFound, Message: "no such contact",
			Header: http.Header{"X-Test": {"kept"}}})
	}
	if req.Msg.GetId() == "con_plain" {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("plain"))
	}
	res := connect.NewResponse(&contactv1.GetContactResponse{Contact: &contactv1.Contact{Id: req.Msg.GetId()}})
	res.Header().Set("ETag", `"v1"`)
	return res, nil
}

func (c *contacts) CreateContact(_ context.Context, req *connect.Request[contactv1.CreateContactRequest]) (*connect.Response[contactv1.CreateContactResponse], error) {
	c.got = req.Msg
	return connect.NewResponse(&contactv1.CreateContactResponse{Contact: req.Msg.GetContact()}), nil
}

func (c *contacts) UpdateContact(_ context.Context, req *connect.Request[contactv1.UpdateContactRequest]) (*connect.Response[contactv1.UpdateContactResponse], error) {
	c.got = req.Msg
	return connect.NewResponse(&contactv1.UpdateContactResponse{Contact: req.Msg.GetContact()}), nil
}

func (c *contacts) BatchCreateContacts(_ context.Context, req *connect.Request[contactv1.BatchCreateContactsRequest]) (*connect.Response[contactv1.BatchCreateContactsResponse], error) {
	c.got = req.Msg
	return connect.NewResponse(&contactv1.BatchCreateContactsResponse{}), nil
}

// TestCalls: a route is served by calling its RPC in process: the request
// message is built from the path, the query and the body as the
// google.api.http rule says, the interceptors see the procedure, the
// answer is the route's status, headers and JSON, and an error is a
// problem with the error's headers.
func TestCalls(t *testing.T) {
	t.Parallel()
	svc := &contacts{}
	var procedures []string
	seen := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			procedures = append(procedures, req.Spec().Procedure)
			return next(ctx, req)
		}
	})
	g := build(t, map[string]Call{
		contactv1connect.ContactServiceListContactsProcedure:        Method(svc.ListContacts),
		contactv1connect.ContactServiceGetContactProcedure:          Method(svc.GetContact),
		contactv1connect.ContactServiceCreateContactProcedure:       Method(svc.CreateContact),
		contactv1connect.ContactServiceUpdateContactProcedure:       Method(svc.UpdateContact),
		contactv1connect.ContactServiceBatchCreateContactsProcedure: Method(svc.BatchCreateContacts),
	}, []connect.Interceptor{seen}, service(t, contactv1connect.ContactServiceName))
	for _, tc := range []struct {
		method, target, ctype, body string
		status                      int
		// want is the request message the call got, as JSON; answer the
		// response body.
		want, answer, procedure string
	}{
		{"GET", "/api/v1/contacts?limit=5&cursor=abc&email=a%40b.co", "", "", 200,
			`{"limit":5,"cursor":"abc","email":"a@b.co"}`, `{"contacts":[{"id":"con_1","email":"a@b.co"}]}`, contactv1connect.ContactServiceListContactsProcedure},
		{"GET", "/api/v1/contacts/con_a%20b", "", "", 200, `{"id":"con_a b"}`, `{"id":"con_a b"}`, contactv1connect.ContactServiceGetContactProcedure},
		{"POST", "/api/v1/contacts", "application/json; charset=utf-8", `{"email":"a@b.co"}`, 201, `{"contact":{"email":"a@b.co"}}`, `{"id":"","email":"a@b.co"}`, contactv1connect.ContactServiceCreateContactProcedure},
		{"POST", "/api/v1/contacts", "application/json", ``, 201, `{}`, `{}`, contactv1connect.ContactServiceCreateContactProcedure},
		{"POST", "/api/v1/contacts", "application/json", `{"email":"a@b.co","nope":1}`, 400, ``, ``, ""},
		{"POST", "/api/v1/contacts/batch", "application/json", `{"contacts":[{"email":"a@b.co"}]}`, 200, `{"contacts":[{"email":"a@b.co"}]}`, `{"results":[]}`, contactv1connect.ContactServiceBatchCreateContactsProcedure},
		{"PATCH", "/api/v1/contacts/con_abc", "application/merge-patch+json", `{"firstName":"A","phone":null}`, 200,
			`{"id":"con_abc","contact":{"firstName":"A"},"updateMask":"firstName,phone"}`, `{"id":"","firstName":"A"}`, contactv1connect.ContactServiceUpdateContactProcedure},
		{"GET", "/api/v1/contacts/con_missing", "", "", 404, `{"id":"con_missing"}`, ``, contactv1connect.ContactServiceGetContactProcedure},
		{"GET", "/api/v1/contacts/con_plain", "", "", 400, `{"id":"con_plain"}`, ``, contactv1connect.ContactServiceGetContactProcedure},
	} {
		svc.got, procedures = nil, nil
		ctx := requestid.WithID(context.Background(), "req_test")
		r := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body)).WithContext(ctx)
		r.Header.Set("Idempotency-Key", "k1")
		if tc.ctype != "" {
			r.Header.Set("Content-Type", tc.ctype)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		name := tc.method + " " + tc.target
		if w.Code != tc.status {
			t.Errorf("%s: status %d, want %d: %s", name, w.Code, tc.status, w.Body)
		}
		if tc.want == "" {
			if svc.got != nil {
				t.Errorf("%s: the call ran", name)
			}
			continue
		}
		if svc.got == nil {
			t.Errorf("%s: the call did not run", name)
			continue
		}
		if got, _ := protojsonString(svc.got); !sameJSON(got, tc.want) {
			t.Errorf("%s: request %s, want %s", name, got, tc.want)
		}
		if len(procedures) != 1 || procedures[0] != tc.procedure {
			t.Errorf("%s: interceptor saw %q, want %q", name, procedures, tc.procedure)
		}
		if tc.status >= 400 {
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("%s: Content-Type %q", name, ct)
			}
			var p struct{ Code, RequestID string }
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Code == "" || p.RequestID != "req_test" {
				t.Errorf("%s: problem %s", name, w.Body)
			}
			continue
		}
		if w.Body.String() != tc.answer {
			t.Errorf("%s: body %s, want %s", name, w.Body, tc.answer)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", name, ct)
		}
	}
	// Headers: the handler's reach the answer, the request's reach the
	// handler, an error's reach the problem.
	r := httptest.NewRequest("GET", "/api/v1/contacts/con_x", nil)
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	if w.Header().Get("ETag") != `"v1"` {
		t.Errorf("ETag %q", w.Header().Get("ETag"))
	}
	r = httptest.NewRequest("GET", "/api/v1/contacts/con_missing", nil)
	w = httptest.NewRecorder()
	g.ServeHTTP(w, r)
	if w.Header().Get("X-Test") != "kept" {
		t.Errorf("error header X-Test %q", w.Header().Get("X-Test"))
	}
	r = httptest.NewRequest("GET", "/api/v1/contacts", nil)
	r.Header.Set("Idempotency-Key", "k2")
	g.ServeHTTP(httptest.NewRecorder(), r)
	if svc.header.Get("Idempotency-Key") != "k2" {
		t.Errorf("request header Idempotency-Key %q", svc.header.Get("Idempotency-Key"))
	}
}

// TestGzip: a large answer is gzipped for a client that accepts it,
// as the RPC handlers gzip theirs.
func TestGzip(t *testing.T) {
	t.Parallel()
	svc := &contacts{}
	g := build(t, map[string]Call{contactv1connect.ContactServiceListContactsProcedure: Method(svc.ListContacts)}, nil,
		service(t, contactv1connect.ContactServiceName))
	g.CompressMinBytes = 10
	for _, accept := range []string{"", "br, gzip"} {
		r := httptest.NewRequest("GET", "/api/v1/contacts", nil)
		if accept != "" {
			r.Header.Set("Accept-Encoding", accept)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		want := ""
		if accept != "" {
			want = "gzip"
		}
		if got := w.Header().Get("Content-Encoding"); got != want || w.Code != 200 {
			t.Errorf("Accept-Encoding %q: status %d, Content-Encoding %q, want %q", accept, w.Code, got, want)
		}
	}
	// Every gzip answer inflates to the plain one, from one goroutine and
	// from several: the encoded JSON and the gzip buffer come from two
	// pools, and handing the gzip buffer back to both (as the JSON's)
	// made later answers compress their own output (gzip: invalid header).
	plain := httptest.NewRecorder()
	g.ServeHTTP(plain, httptest.NewRequest("GET", "/api/v1/contacts", nil))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 200 {
				r := httptest.NewRequest("GET", "/api/v1/contacts", nil)
				r.Header.Set("Accept-Encoding", "gzip")
				w := httptest.NewRecorder()
				g.ServeHTTP(w, r)
				zr, err := gzip.NewReader(w.Body)
				var got []byte
				if err == nil {
					got, err = io.ReadAll(zr)
				}
				if err != nil || string(got) != plain.Body.String() {
					t.Errorf("gzip answer %d: %q, %v; want %q", i, got, err, plain.Body.String())
					return
				}
			}
		})
	}
	wg.Wait()
}

func protojsonString(m proto.Message) (string, error) {
	b, err := protojsonCompact.Marshal(m)
	return string(b), err
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

var protojsonCompact = protojson.MarshalOptions{}

// TestQueryParameterUnderTwoNames: a query parameter sent under its JSON
// name and its proto name (externalId and external_id) is a repeated
// parameter, 400. It was accepted, and which value the filter got depended
// on Go's map order: the same request listed different records.
func TestQueryParameterUnderTwoNames(t *testing.T) {
	t.Parallel()
	svc := &contacts{}
	g := build(t, map[string]Call{contactv1connect.ContactServiceListContactsProcedure: Method(svc.ListContacts)}, nil,
		service(t, contactv1connect.ContactServiceName))
	for _, q := range []string{"externalId=x&external_id=y", "external_id=y&externalId=x", "updatedSince=2026-01-01T00:00:00Z&updated_since=2026-01-02T00:00:00Z"} {
		for range 20 {
			r := httptest.NewRequest("GET", "/api/v1/contacts?"+q, nil)
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			var p struct{ Code, Detail string }
			if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Code != apierror.CodeMalformedRequest ||
				!strings.Contains(p.Detail, "repeated") {
				t.Fatalf("?%s: status %d: %s", q, w.Code, w.Body)
			}
		}
	}
	// One name each is fine.
	r := httptest.NewRequest("GET", "/api/v1/contacts?external_id=y&email=a%40b.co", nil)
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("two different parameters: status %d: %s", w.Code, w.Body)
	}
}

// TestGzipVaries: whether an answer is gzipped depends on the
// request's Accept-Encoding, so every answer that may be gzipped says so
// (Vary: Accept-Encoding, as the Connect handlers say on their GETs), the
// small plain ones too: a cache must not hand a stored gzip answer to a
// client that cannot read it.
func TestGzipVaries(t *testing.T) {
	t.Parallel()
	svc := &contacts{}
	g := build(t, map[string]Call{contactv1connect.ContactServiceListContactsProcedure: Method(svc.ListContacts)}, nil,
		service(t, contactv1connect.ContactServiceName))
	for _, min := range []int{10, 1 << 20} {
		g.CompressMinBytes = min
		for _, accept := range []string{"", "gzip"} {
			r := httptest.NewRequest("GET", "/api/v1/contacts", nil)
			if accept != "" {
				r.Header.Set("Accept-Encoding", accept)
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code != http.StatusOK || w.Header().Values("Vary") == nil || w.Header().Get("Vary") != "Accept-Encoding" {
				t.Errorf("CompressMinBytes %d, Accept-Encoding %q: status %d, Vary %q", min, accept, w.Code, w.Header().Values("Vary"))
			}
		}
	}
}

// TestEncodingFailureKeepsNoRecordHeaders: an answer that cannot be
// encoded (here a string of invalid UTF-8, which protojson refuses) is a
// 500 problem, and the headers its handler set for the record it could not
// send (ETag, Location) are not sent with it.
func TestEncodingFailureKeepsNoRecordHeaders(t *testing.T) {
	t.Parallel()
	g := build(t, map[string]Call{
		contactv1connect.ContactServiceGetContactProcedure: Method(func(_ context.Context, req *connect.Request[contactv1.GetContactRequest]) (*connect.Response[contactv1.GetContactResponse], error) {
			res := connect.NewResponse(&contactv1.GetContactResponse{Contact: &contactv1.Contact{Id: "con_\xff"}})
			res.Header().Set("ETag", `"v1"`)
			res.Header().Set("Location", "/api/v1/contacts/con_x")
			return res, nil
		}),
	}, nil, service(t, contactv1connect.ContactServiceName))
	ctx := requestid.WithID(context.Background(), "req_test")
	w := httptest.NewRecorder()
	g.ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/contacts/con_x", nil).WithContext(ctx))
	if w.Code != 500 || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("unencodable answer: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if w.Header().Get("ETag") != "" || w.Header().Get("Location") != "" {
		t.Fatalf("a 500 carries the record's headers: %v", w.Header())
	}
}
