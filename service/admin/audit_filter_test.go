package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/service/servertest"
)

// listAudit reads one page of the audit log with filters, as member.
func listAudit(t *testing.T, h *servertest.Harness, req *adminv1.ListAuditEventsRequest) []*adminv1.AuditEvent {
	t.Helper()
	res, err := h.AdminClient.ListAuditEvents(context.Background(), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("list audit events %v: %v", req, err)
	}
	return res.Msg.GetEvents()
}

// actions lists the events as "action actor_type".
func actions(events []*adminv1.AuditEvent) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, e.GetAction()+" "+e.GetActorType())
	}
	return out
}

// TestAuditEventsNameTheirActorsAndFilter (issue 36): an event carries the
// names beside its ids (the acting member's email, the client's name, the
// email of the member acted on) and who acted: the member, the API client
// for a change it made with its own token (a webhook endpoint's create;
// the log showed "operator" for it), or the operator. The list filters by
// action, actor, client and changes or reads, over Connect and REST alike,
// and every bad filter is one 422 naming each field. Ids are "aud_…", and
// a page token of release 1.1.0 ("evt_…") still pages.
func TestAuditEventsNameTheirActorsAndFilter(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	ws, member := h.Workspace("Named Audit")
	clientID, secret := h.FastClient(ws, member, "leads:read", "webhooks:read", "webhooks:write")
	other, _ := h.Client(ws, member, "contacts:read")
	token := h.Token(clientID, secret, "")
	status, _, body := h.Do("POST", "/api/v1/webhook-endpoints", token, "application/json",
		`{"url":"https://hooks.example.com/audit","eventTypes":["lead.created"]}`)
	if status != http.StatusCreated {
		t.Fatalf("create endpoint: status %d: %s", status, body)
	}
	if _, err := h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: other, MemberId: member})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.AdminClient.ListApiClients(ctx, connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: ws, MemberId: member})); err != nil {
		t.Fatal(err)
	}

	all := listAudit(t, h, &adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: member})
	want := []string{
		"api_client.list member", "api_client.deactivate member", "webhook_endpoint.create client",
		"api_client.create member", "api_client.create member", "member.add operator", "workspace.create operator",
	}
	if got := actions(all); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("the log without filters:\n got %v\nwant %v", got, want)
	}
	email := "admin@named-audit.test"
	for _, e := range all {
		if !strings.HasPrefix(e.GetId(), "aud_") {
			t.Errorf("id %q, want aud_…", e.GetId())
		}
		switch e.GetAction() {
		case "webhook_endpoint.create":
			if e.GetClientId() != clientID || e.GetClientName() != "test client" || e.GetActorMemberId() != "" || e.GetActorEmail() != "" ||
				e.GetTokenHashPrefix() == "" || e.GetRead() {
				t.Errorf("the client's own change: %v", e)
			}
		case "api_client.deactivate":
			if e.GetActorMemberId() != member || e.GetActorEmail() != email || e.GetClientId() != other || e.GetClientName() != "test client" {
				t.Errorf("a member's change: %v", e)
			}
		case "member.add":
			if e.GetMemberId() != member || e.GetMemberEmail() != email || e.GetActorEmail() != "" {
				t.Errorf("the operator's member.add: %v", e)
			}
		case "api_client.list":
			if !e.GetRead() {
				t.Errorf("a list is not marked read: %v", e)
			}
		}
	}

	// Each filter, alone and together. The reads of the log itself
	// (audit_event.list) are recorded after each page is read.
	for _, c := range []struct {
		name string
		req  *adminv1.ListAuditEventsRequest
		want []string
	}{
		{"changes", &adminv1.ListAuditEventsRequest{Kind: "changes"}, want[1:]},
		{"reads of clients", &adminv1.ListAuditEventsRequest{Kind: "reads", Action: "api_client.list"}, []string{"api_client.list member"}},
		{"changes of reads", &adminv1.ListAuditEventsRequest{Kind: "changes", Action: "api_client.list"}, []string{}},
		{"action", &adminv1.ListAuditEventsRequest{Action: "api_client.create"}, []string{"api_client.create member", "api_client.create member"}},
		{"actor client", &adminv1.ListAuditEventsRequest{Actor: clientID}, []string{"webhook_endpoint.create client"}},
		{"actor operator", &adminv1.ListAuditEventsRequest{Actor: "operator"}, []string{"member.add operator", "workspace.create operator"}},
		{"actor member, changes", &adminv1.ListAuditEventsRequest{Actor: member, Kind: "changes"}, []string{"api_client.deactivate member", "api_client.create member", "api_client.create member"}},
		{"client", &adminv1.ListAuditEventsRequest{ClientId: clientID}, []string{"webhook_endpoint.create client", "api_client.create member"}},
		{"client and action", &adminv1.ListAuditEventsRequest{ClientId: other, Action: "api_client.deactivate"}, []string{"api_client.deactivate member"}},
		{"no such action", &adminv1.ListAuditEventsRequest{Action: "api_client.fly"}, []string{}},
	} {
		c.req.WorkspaceId, c.req.MemberId = ws, member
		if got := actions(listAudit(t, h, c.req)); strings.Join(got, ", ") != strings.Join(c.want, ", ") {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}

	reads := listAudit(t, h, &adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: member, Kind: "reads"})
	if len(reads) < 2 || reads[len(reads)-1].GetAction() != "api_client.list" {
		t.Errorf("reads: %v", actions(reads))
	}
	for _, e := range reads {
		if !e.GetRead() || (e.GetAction() != "audit_event.list" && e.GetAction() != "api_client.list") {
			t.Errorf("reads: %v", e)
		}
	}

	// Pages of a filter, and a page token of release 1.1.0's form.
	res, err := h.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: member, Kind: "changes", Limit: 2}))
	if err != nil {
		t.Fatal(err)
	}
	next := res.Msg.GetNextPageToken()
	if !strings.HasPrefix(next, "aud_") {
		t.Fatalf("next page token %q, want aud_…", next)
	}
	page2 := actions(listAudit(t, h, &adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: member, Kind: "changes", Limit: 2, PageToken: next}))
	legacy := actions(listAudit(t, h, &adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: member, Kind: "changes", Limit: 2,
		PageToken: "evt_" + strings.TrimPrefix(next, "aud_")}))
	if strings.Join(page2, ", ") != "api_client.create member, api_client.create member" || strings.Join(legacy, ", ") != strings.Join(page2, ", ") {
		t.Fatalf("second page %v; with the evt_ token %v", page2, legacy)
	}

	// Over REST, the same filters as query parameters, and every bad one
	// named at once.
	q := url.Values{"memberId": {member}, "actor": {clientID}}
	status, body, err = servertest.Call("GET", h.Admin.URL+"/admin/v1/workspaces/"+ws+"/audit-events?"+q.Encode(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusOK {
		t.Fatalf("REST with a filter: status %d: %s", status, body)
	}
	var page struct {
		Events []struct{ ID, Action, ActorType, ClientName string }
	}
	servertest.MustUnmarshal(t, body, &page)
	if len(page.Events) != 1 || page.Events[0].Action != "webhook_endpoint.create" || page.Events[0].ActorType != "client" || page.Events[0].ClientName != "test client" {
		t.Fatalf("REST with actor=%s: %s", clientID, body)
	}
	q = url.Values{"memberId": {member}, "actor": {"someone"}, "clientId": {"cli_x"}, "action": {"Drop Table"}, "kind": {"all"}, "pageToken": {"aud_0"}}
	status, body, err = servertest.Call("GET", h.Admin.URL+"/admin/v1/workspaces/"+ws+"/audit-events?"+q.Encode(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusBadRequest {
		t.Fatalf("bad filters: status %d: %s", status, body)
	}
	var answer struct {
		Details []struct {
			FieldViolations []struct{ Field string }
		}
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, d := range answer.Details {
		for _, v := range d.FieldViolations {
			named[v.Field] = true
		}
	}
	for _, f := range []string{"actor", "clientId", "action", "kind", "pageToken"} {
		if !named[f] {
			t.Errorf("bad filters: no violation of %s in %s", f, body)
		}
	}
}
