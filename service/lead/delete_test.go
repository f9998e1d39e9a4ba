package lead_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// TestDeleteLead: 204 and gone over REST, If-Match honoured, its
// externalId free again, another workspace's lead untouched (404), and
// the same over Connect, gRPC and gRPC-Web (NotFound the second time).
func TestDeleteLead(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Delete Leads")
	other := h.NewTenant("Delete Leads Elsewhere")
	create := func(tok, body string) (string, string) {
		t.Helper()
		s, hdr, b := h.Do(http.MethodPost, "/api/v1/leads", tok, "application/json", body)
		if s != 201 {
			t.Fatalf("create %s: %d %s", body, s, b)
		}
		return servertest.ID(t, b), hdr.Get("ETag")
	}
	id, tag := create(tn.Token, `{"contact":{"email":"ann@x.co"},"externalId":"form-1"}`)
	theirs, _ := create(other.Token, `{"contact":{"email":"ann@x.co"},"externalId":"form-1"}`)
	if s, _, _ := h.Do(http.MethodDelete, "/api/v1/leads/"+theirs, tn.Token, "", ""); s != 404 {
		t.Errorf("DELETE of another workspace's lead: %d", s)
	}
	if s, _, _ := h.Do(http.MethodDelete, "/api/v1/leads/"+id, tn.Token, "", "", "If-Match", `"stale"`); s != 412 {
		t.Errorf("stale If-Match: %d", s)
	}
	if s, _, b := h.Do(http.MethodDelete, "/api/v1/leads/"+id, tn.Token, "", "", "If-Match", tag); s != 204 || len(b) != 0 {
		t.Fatalf("DELETE: %d %s", s, b)
	}
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/leads/"+id, tn.Token, "", ""); s != 404 {
		t.Errorf("GET after DELETE: %d", s)
	}
	if s, _, _ := h.Do(http.MethodDelete, "/api/v1/leads/"+id, tn.Token, "", ""); s != 404 {
		t.Errorf("second DELETE: %d", s)
	}
	create(tn.Token, `{"contact":{"email":"ann@x.co"},"externalId":"form-1"}`) // the externalId is free again
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/leads/"+theirs, other.Token, "", ""); s != 200 {
		t.Errorf("the other workspace's lead: %d", s)
	}

	for name, opts := range map[string][]connect.ClientOption{
		"connect": nil, "grpc": {connect.WithGRPC()}, "grpcweb": {connect.WithGRPCWeb()},
	} {
		lc := leadv1connect.NewLeadServiceClient(h.HTTP2Client(), h.Public.URL, append(opts, connect.WithInterceptors(servertest.Bearer(tn.Token)))...)
		id, _ := create(tn.Token, `{"contact":{"email":"`+name+`@x.co"}}`)
		if _, err := lc.DeleteLead(context.Background(), connect.NewRequest(&leadv1.DeleteLeadRequest{Id: id})); err != nil {
			t.Fatalf("%s DeleteLead: %v", name, err)
		}
		_, err := lc.DeleteLead(context.Background(), connect.NewRequest(&leadv1.DeleteLeadRequest{Id: id}))
		servertest.AssertConnectError(t, err, connect.CodeNotFound, "not_found")
	}
}
