package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	identityv1 "github.com/svat/partnerapi/gen/partner/identity/v1"
	"github.com/svat/partnerapi/gen/partner/identity/v1/identityv1connect"
	tokenv1 "github.com/svat/partnerapi/gen/partner/token/v1"
	"github.com/svat/partnerapi/gen/partner/token/v1/tokenv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// This file is the RPC review's: what a Go or TypeScript service team
// calling the generated clients over Connect, gRPC and gRPC-Web expects,
// compared with REST on the same data.

var rpcProtocols = map[string][]connect.ClientOption{
	"connect":  nil,
	"grpc":     {connect.WithGRPC()},
	"grpc-web": {connect.WithGRPCWeb()},
}

// garbageCodec is the binary codec under the name "proto" that sends bytes
// that are no protobuf message at all (a field with wire type 7).
type garbageCodec struct{}

func (garbageCodec) Name() string                    { return "proto" }
func (garbageCodec) Marshal(any) ([]byte, error)     { return []byte{0x0f, 0xff, 0xff, 0xff}, nil }
func (garbageCodec) Unmarshal(b []byte, v any) error { return proto.Unmarshal(b, v.(proto.Message)) }

// TestMalformedProtobufIsInvalidArgumentOverRPC: a binary request that is
// not a protobuf message is the caller's InvalidArgument over every
// protocol, never Internal or Unknown.
func TestMalformedProtobufIsInvalidArgumentOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Garbage Co")
	for name, opts := range rpcProtocols {
		t.Run(name, func(t *testing.T) {
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL,
				append(opts, connect.WithCodec(garbageCodec{}), connect.WithInterceptors(bearerInterceptor(tn.Token)))...)
			_, err := c.CreateContact(context.Background(), connect.NewRequest(&contactv1.CreateContactRequest{}))
			assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
			_, err = c.ListContacts(context.Background(), connect.NewRequest(&contactv1.ListContactsRequest{}))
			assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
		})
	}
}

// garbageJSONCodec is the "json" codec sending JSON that ends early.
type garbageJSONCodec struct{}

func (garbageJSONCodec) Name() string                { return "json" }
func (garbageJSONCodec) Marshal(any) ([]byte, error) { return []byte(`{"contact":`), nil }
func (garbageJSONCodec) Unmarshal(b []byte, v any) error {
	return protojson.Unmarshal(b, v.(proto.Message))
}

// TestMalformedRequestsCarryTheProblemOverRPC: undecodable JSON is the
// same malformed_request, with ErrorInfo, as undecodable protobuf; on the
// token RPCs it is RFC 6749's invalid_request; on the admin service
// malformed_request; and a caller without a token still learns that first.
func TestMalformedRequestsCarryTheProblemOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Garbage JSON Co")
	for name, opts := range rpcProtocols {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL,
				append(opts, connect.WithCodec(garbageJSONCodec{}), connect.WithInterceptors(bearerInterceptor(tn.Token)))...)
			_, err := c.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{}))
			ce := assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
			if !strings.Contains(ce.Message(), "JSON") {
				t.Errorf("message %q does not say what is wrong", ce.Message())
			}
			anon := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL, append(opts, connect.WithCodec(garbageCodec{}))...)
			_, err = anon.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{}))
			assertConnectError(t, err, connect.CodeUnauthenticated, "unauthenticated")
			tok := tokenv1connect.NewTokenServiceClient(h.HTTP2Client(), h.Public.URL, append(opts, connect.WithCodec(garbageCodec{}))...)
			req := connect.NewRequest(&tokenv1.CreateTokenRequest{GrantType: "client_credentials"})
			req.Header().Set("Authorization", basicHeader(tn.ClientID, tn.ClientSecret))
			_, err = tok.CreateToken(ctx, req)
			assertConnectError(t, err, connect.CodeInvalidArgument, "invalid_request")
		})
	}
	admin := adminv1connect.NewAdminServiceClient(h.Admin.Client(), h.Admin.URL, connect.WithCodec(garbageCodec{}))
	_, err := admin.CreateWorkspace(context.Background(), connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "x"}))
	assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
}

// TestOversizedMessageOverRPC: a message over 1 MiB is ResourceExhausted
// over every protocol.
func TestOversizedMessageOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Big Co")
	big := strings.Repeat("x", 1<<20+10)
	for name, opts := range rpcProtocols {
		t.Run(name, func(t *testing.T) {
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL,
				append(opts, connect.WithInterceptors(bearerInterceptor(tn.Token)))...)
			_, err := c.CreateContact(context.Background(), connect.NewRequest(&contactv1.CreateContactRequest{
				Contact: &contactv1.Contact{Email: ptr("big@x.co"), FirstName: &big}}))
			assertConnectError(t, err, connect.CodeResourceExhausted, "payload_too_large")
		})
	}
}

// timeoutHeader sets the protocol's own deadline header without a client
// deadline, so the answer observed is the server's, not the client's.
func timeoutHeader(protocol string) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if protocol == "connect" {
				req.Header().Set("Connect-Timeout-Ms", "300")
			} else {
				req.Header().Set("Grpc-Timeout", "300m")
			}
			return next(ctx, req)
		}
	})
}

// TestRPCDeadlineShorterThanDatabaseWork: a caller's deadline that passes
// while the request waits for the database is DeadlineExceeded, not
// Internal, and not the 503 of our own budget.
func TestRPCDeadlineShorterThanDatabaseWork(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Deadline Co")
	ctx := context.Background()
	// Warm the token cache: the lookup must not be what waits.
	me := identityv1connect.NewIdentityServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithInterceptors(bearerInterceptor(tn.Token)))
	if _, err := me.GetMe(ctx, connect.NewRequest(&identityv1.GetMeRequest{})); err != nil {
		t.Fatal(err)
	}
	tx, err := dbtest.Raw(t, h.DB).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	for name, opts := range rpcProtocols {
		t.Run(name, func(t *testing.T) {
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL,
				append(opts, connect.WithInterceptors(bearerInterceptor(tn.Token), timeoutHeader(name)))...)
			start := time.Now()
			_, err := c.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: ptr(name + "@deadline.test")}}))
			if connect.CodeOf(err) != connect.CodeDeadlineExceeded {
				t.Errorf("CreateContact behind a lock with a 300 ms deadline: %v after %v, want DeadlineExceeded", err, time.Since(start))
			}
			_, err = c.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{}))
			if connect.CodeOf(err) != connect.CodeDeadlineExceeded {
				t.Errorf("ListContacts behind a lock with a 300 ms deadline: %v, want DeadlineExceeded", err)
			}
		})
	}
}

// TestIdempotencyOverRPC: Idempotency-Key as request metadata behaves as
// over REST on every protocol: a replay with Idempotent-Replayed, a reuse
// with another body FailedPrecondition idempotency_key_reused, a bad key
// InvalidArgument.
func TestIdempotencyOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Idem Co")
	for name, opts := range rpcProtocols {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL,
				append(opts, connect.WithInterceptors(bearerInterceptor(tn.Token)))...)
			mk := func(email, key string) *connect.Request[contactv1.CreateContactRequest] {
				r := connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: ptr(email)}})
				r.Header().Set("Idempotency-Key", key)
				return r
			}
			a, err := c.CreateContact(ctx, mk(name+"@idem.test", name+"-k"))
			if err != nil {
				t.Fatal(err)
			}
			if a.Header().Get("Idempotent-Replayed") != "" {
				t.Errorf("first create says replayed")
			}
			b, err := c.CreateContact(ctx, mk(name+"@idem.test", name+"-k"))
			if err != nil || b.Msg.GetContact().GetId() != a.Msg.GetContact().GetId() || b.Header().Get("Idempotent-Replayed") != "true" ||
				b.Header().Get("ETag") != a.Header().Get("ETag") {
				t.Fatalf("replay: %v %v", b, err)
			}
			_, err = c.CreateContact(ctx, mk(name+"-other@idem.test", name+"-k"))
			assertConnectError(t, err, connect.CodeFailedPrecondition, "idempotency_key_reused")
			_, err = c.CreateContact(ctx, mk(name+"-long@idem.test", strings.Repeat("k", 256)))
			assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
			// A batch over RPC replays too.
			mkb := func() *connect.Request[contactv1.BatchCreateContactsRequest] {
				r := connect.NewRequest(&contactv1.BatchCreateContactsRequest{Contacts: []*contactv1.Contact{{Email: ptr(name + "-b@idem.test")}}})
				r.Header().Set("Idempotency-Key", name+"-batch")
				return r
			}
			ba, err := c.BatchCreateContacts(ctx, mkb())
			if err != nil {
				t.Fatal(err)
			}
			bb, err := c.BatchCreateContacts(ctx, mkb())
			if err != nil || bb.Header().Get("Idempotent-Replayed") != "true" ||
				bb.Msg.GetResults()[0].GetContact().GetId() != ba.Msg.GetResults()[0].GetContact().GetId() {
				t.Fatalf("batch replay: %v %v", bb, err)
			}
		})
	}
}

// TestRateLimitHeadersOverRPC: RPC answers, errors included, carry the
// RateLimit headers of the bucket they spent.
func TestRateLimitHeadersOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Headers Co")
	for name, opts := range rpcProtocols {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL,
				append(opts, connect.WithInterceptors(bearerInterceptor(tn.Token)))...)
			l, err := c.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			if bucket, _, _, _, _ := rateHeaders(t, l.Header()); bucket != "read" {
				t.Errorf("list: bucket %q", bucket)
			}
			cr, err := c.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: ptr(name + "@hdr.test")}}))
			if err != nil {
				t.Fatal(err)
			}
			if bucket, _, _, _, _ := rateHeaders(t, cr.Header()); bucket != "write" {
				t.Errorf("create: bucket %q", bucket)
			}
			_, err = c.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: ptr("bad")}}))
			ce := assertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
			if !rateHeadersPresent(ce.Meta()) {
				t.Errorf("validation error without RateLimit headers: %v", ce.Meta())
			}
		})
	}
}

// TestListsOverRPCMatchREST: the same walk over REST and over RPC gives the
// same records in the same pages, the last page of a sort=updatedAt walk
// carries a syncCursor over RPC too, and a cursor of one face works on the
// other.
func TestListsOverRPCMatchREST(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Lists Co")
	for i := range 5 {
		if s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"l`+string(rune('a'+i))+`@lists.test"}`); s != 201 {
			t.Fatalf("create: %d %s", s, b)
		}
	}
	type restPage struct {
		Contacts []struct {
			ID string `json:"id"`
		} `json:"contacts"`
		Pagination struct {
			NextCursor string `json:"nextCursor"`
			SyncCursor string `json:"syncCursor"`
		} `json:"pagination"`
	}
	var restIDs []string
	var restSync string
	// A sync walk withholds changes while an older transaction is open
	// anywhere in the cluster (the parallel tests hold some): walk again
	// until all five are below the watermark, which only moves forward.
	dbtest.Until(15*time.Second, func() bool {
		restIDs, restSync = nil, ""
		cursor := ""
		for {
			s, _, b := h.Do(http.MethodGet, "/api/v1/contacts?sort=updatedAt&limit=2&cursor="+cursor, tn.Token, "", "")
			if s != 200 {
				t.Fatalf("REST list: %d %s", s, b)
			}
			var p restPage
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			for _, c := range p.Contacts {
				restIDs = append(restIDs, c.ID)
			}
			if p.Pagination.NextCursor == "" {
				restSync = p.Pagination.SyncCursor
				break
			}
			cursor = p.Pagination.NextCursor
		}
		return len(restIDs) == 5
	})
	if len(restIDs) != 5 || restSync == "" {
		t.Fatalf("REST walk: %v sync %q", restIDs, restSync)
	}
	for name, opts := range rpcProtocols {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL,
				append(opts, connect.WithInterceptors(bearerInterceptor(tn.Token)))...)
			var ids []string
			var sync string
			cursor := ""
			for {
				p, err := c.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{Sort: "updatedAt", Limit: ptr[int32](2), Cursor: cursor}))
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range p.Msg.GetContacts() {
					ids = append(ids, c.GetId())
				}
				if p.Msg.GetPagination().NextCursor == nil {
					sync = p.Msg.GetPagination().GetSyncCursor()
					break
				}
				cursor = p.Msg.GetPagination().GetNextCursor()
			}
			if strings.Join(ids, ",") != strings.Join(restIDs, ",") || sync == "" {
				t.Fatalf("RPC walk %v sync %q, REST walk %v", ids, sync, restIDs)
			}
			// The REST syncCursor works over RPC: nothing changed since.
			p, err := c.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{Sort: "updatedAt", Limit: ptr[int32](2), Cursor: restSync}))
			if err != nil || len(p.Msg.GetContacts()) != 0 || p.Msg.GetPagination().GetSyncCursor() == "" {
				t.Fatalf("REST syncCursor over RPC: %v %v", p, err)
			}
			// A cursor used with other filters is InvalidArgument, as REST's 400.
			_, err = c.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{Sort: "-createdAt", Cursor: restSync}))
			assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
			_, err = c.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{Limit: ptr[int32](0)}))
			assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
		})
	}
}

// TestFieldMasksOverRPC: an unknown or read-only path is InvalidArgument
// naming the member in JSON names (the top one when the path is below a
// member that cannot be updated); "*" replaces every writable field.
func TestFieldMasksOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Masks Co")
	for name, opts := range rpcProtocols {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL,
				append(opts, connect.WithInterceptors(bearerInterceptor(tn.Token)))...)
			cr, err := c.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{
				Email: ptr(name + "@mask.test"), FirstName: ptr("Ann"), JobTitle: ptr("CTO")}}))
			if err != nil {
				t.Fatal(err)
			}
			id := cr.Msg.GetContact().GetId()
			for path, field := range map[string]string{"nope": "nope", "id": "id", "updated_at": "updatedAt", "contact.email": "contact"} {
				_, err = c.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{},
					UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{path}}}))
				ce := assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
				if br := badRequest(ce); len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != field {
					t.Errorf("mask %q: BadRequest = %v", path, br)
				}
			}
			res, err := c.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id,
				Contact: &contactv1.Contact{Email: ptr(name + "@mask.test"), LastName: ptr("Lee")}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"*"}}}))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Msg.GetContact(); got.GetLastName() != "Lee" || got.FirstName != nil || got.JobTitle != nil || got.GetEmail() != name+"@mask.test" {
				t.Errorf("mask *: %v", got)
			}
			// An empty mask is an omitted one: the populated fields change,
			// the others stay.
			res, err = c.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id,
				Contact: &contactv1.Contact{JobTitle: ptr("CFO")}, UpdateMask: &fieldmaskpb.FieldMask{}}))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Msg.GetContact(); got.GetJobTitle() != "CFO" || got.GetLastName() != "Lee" {
				t.Errorf("empty mask: %v", got)
			}
			// "*" clearing the only way to reach the contact is a 422 like any
			// merge that leaves neither email nor phone.
			_, err = c.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id,
				Contact: &contactv1.Contact{LastName: ptr("Lee")}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"*"}}}))
			assertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
		})
	}
}

// TestBatchItemProblemsOverRPCMatchREST: a failed item of an RPC batch
// carries the problem the REST batch answers for it (but its requestId).
func TestBatchItemProblemsOverRPCMatchREST(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Batch Co")
	if s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"taken@batch.test"}`); s != 201 {
		t.Fatalf("%d %s", s, b)
	}
	s, _, b := h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json",
		`{"contacts":[{"email":"bad"},{"email":"taken@batch.test"},{"phone":"1"}]}`)
	if s != 200 {
		t.Fatalf("REST batch: %d %s", s, b)
	}
	var rest struct {
		Results []struct {
			Error any `json:"error"`
		} `json:"results"`
	}
	mustUnmarshal(t, b, &rest)
	for name, opts := range rpcProtocols {
		t.Run(name, func(t *testing.T) {
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL,
				append(opts, connect.WithInterceptors(bearerInterceptor(tn.Token)))...)
			res, err := c.BatchCreateContacts(context.Background(), connect.NewRequest(&contactv1.BatchCreateContactsRequest{Contacts: []*contactv1.Contact{
				{Email: ptr("bad")}, {Email: ptr("taken@batch.test")}, {Phone: ptr("1")}}}))
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res.Msg.GetResults() {
				p := r.GetError()
				if p == nil {
					t.Fatalf("item %d: %v", i, r)
				}
				js, _ := json.Marshal(map[string]any{"status": p.GetStatus(), "code": p.GetCode(), "detail": p.GetDetail(),
					"existingId": p.GetExistingId(), "errors": len(p.GetErrors()), "type": p.GetType(), "title": p.GetTitle()})
				want := problemWithoutRequestID(t, rest.Results[i].Error)
				var got map[string]any
				mustUnmarshal(t, js, &got)
				for k, v := range got {
					if k == "errors" {
						if w, _ := want["errors"].([]any); float64(len(w)) != v {
							t.Errorf("item %d: %d errors over RPC, REST %v", i, len(p.GetErrors()), want["errors"])
						}
						continue
					}
					if k == "existingId" && v == "" && want[k] == nil {
						continue
					}
					if want[k] != v {
						t.Errorf("item %d: %s = %v over RPC, %v over REST", i, k, v, want[k])
					}
				}
			}
			// 0 and 101 items: InvalidArgument for the whole request.
			_, err = c.BatchCreateContacts(context.Background(), connect.NewRequest(&contactv1.BatchCreateContactsRequest{}))
			assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
		})
	}
}

// TestBearerSchemeCaseOverRPC: the auth scheme is case-insensitive (RFC
// 7235) in gRPC metadata as in HTTP headers.
func TestBearerSchemeCaseOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Case Co")
	for name, opts := range rpcProtocols {
		t.Run(name, func(t *testing.T) {
			for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
				c := identityv1connect.NewIdentityServiceClient(h.HTTP2Client(), h.Public.URL, opts...)
				req := connect.NewRequest(&identityv1.GetMeRequest{})
				req.Header().Set("authorization", scheme+" "+tn.Token)
				if _, err := c.GetMe(context.Background(), req); err != nil {
					t.Errorf("%s: %v", scheme, err)
				}
			}
		})
	}
}

// TestRPCErrorsCarryRequestIDAndRefuseTwoTokens: an RPC error carries the
// Request-Id the REST problem names, and two Authorization values in the
// metadata are malformed input, as two headers are over REST.
func TestRPCErrorsCarryRequestIDAndRefuseTwoTokens(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Request Id Co")
	for name, opts := range rpcProtocols {
		t.Run(name, func(t *testing.T) {
			c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL, append(opts, connect.WithInterceptors(bearerInterceptor(tn.Token)))...)
			_, err := c.GetContact(context.Background(), connect.NewRequest(&contactv1.GetContactRequest{Id: "con_nope"}))
			ce := assertConnectError(t, err, connect.CodeNotFound, "not_found")
			if !strings.HasPrefix(ce.Meta().Get("Request-Id"), "req_") {
				t.Errorf("no Request-Id in %v", ce.Meta())
			}
			two := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL, opts...)
			req := connect.NewRequest(&contactv1.ListContactsRequest{})
			req.Header().Add("Authorization", "Bearer "+tn.Token)
			req.Header().Add("Authorization", "Bearer "+tn.Token)
			_, err = two.ListContacts(context.Background(), req)
			assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
		})
	}
}
