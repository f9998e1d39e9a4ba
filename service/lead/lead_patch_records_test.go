package lead_test

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"connectrpc.com/connect"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/service/servertest"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// TestPatchLead: status moves, nested merge of value, null clears or
// restores a default, contactId must exist, the inline contact is
// create-only, duplicate externalId.
func TestPatchLead(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Patch Leads")
	other := h.NewTenant("Patch Leads Elsewhere")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"kay@x.co","firstName":"Kay","lastName":"Ross"}`)
	kay := servertest.ID(t, b)
	_, _, b = h.Do(http.MethodPost, "/api/v1/contacts", other.Token, "application/json", `{"email":"theirs@x.co"}`)
	foreign := servertest.ID(t, b)
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json",
		`{"contact":{"email":"lee@x.co","firstName":"Lee"},"title":"Big deal","source":"web_form","campaign":"Q1","value":{"amount":1000,"currency":"usd"},"externalId":"form-1"}`)
	lead := servertest.Decode(t, b)
	path := "/api/v1/leads/" + lead["id"].(string)
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+kay+`","externalId":"form-2"}`)
	second := servertest.ID(t, b)
	patch := func(body string) (int, map[string]any) {
		t.Helper()
		s, _, b := h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", body)
		return s, servertest.Decode(t, b)
	}

	if s, l := patch(`{"status":"qualified"}`); s != 200 || l["status"] != "qualified" || l["title"] != "Big deal" || l["source"] != "web_form" {
		t.Fatalf("status: %d %v", s, l)
	}
	if s, l := patch(`{"value":{"amount":2500}}`); s != 200 || !reflect.DeepEqual(l["value"], map[string]any{"amount": float64(2500), "currency": "USD"}) {
		t.Errorf("value.amount merge: %d %v", s, l)
	}
	if s, l := patch(`{"value":{"currency":"eur"},"campaign":null}`); s != 200 || !reflect.DeepEqual(l["value"], map[string]any{"amount": float64(2500), "currency": "EUR"}) || l["campaign"] != nil {
		t.Errorf("value.currency merge and campaign clear: %d %v", s, l)
	}
	// An empty object merges nothing into a value that exists (RFC 7396).
	if s, l := patch(`{"value":{}}`); s != 200 || !reflect.DeepEqual(l["value"], map[string]any{"amount": float64(2500), "currency": "EUR"}) {
		t.Errorf("value {} on a set value: %d %v", s, l)
	}
	if s, l := patch(`{"value":null}`); s != 200 || l["value"] != nil {
		t.Errorf("value null: %d %v", s, l)
	}
	// ...and into no value it adds none (an empty amount would be invalid).
	if s, l := patch(`{"value":{}}`); s != 200 || l["value"] != nil {
		t.Errorf("value {} on no value: %d %v", s, l)
	}
	if s, l := patch(`{"value":{"amount":5}}`); s != 422 || !servertest.HasViolation(l, "value.currency") {
		t.Errorf("value.amount without a currency: %d %v", s, l)
	}
	// Moving the lead to another contact; null title is its default again,
	// null status is "new" again.
	if s, l := patch(`{"contactId":"` + kay + `","title":null,"status":null}`); s != 200 || l["contactId"] != kay || l["title"] != "Kay Ross" || l["status"] != "new" {
		t.Errorf("move to another contact: %d %v", s, l)
	}
	for body, want := range map[string]struct {
		status      int
		code, field string
	}{
		`{"contactId":"` + foreign + `"}`:               {422, "validation_failed", "contactId"},
		`{"contactId":"nope"}`:                          {422, "validation_failed", "contactId"},
		`{"contactId":null}`:                            {422, "validation_failed", "contactId"},
		`{"status":"won"}`:                              {422, "validation_failed", "status"},
		`{"source":"Web Form"}`:                         {422, "validation_failed", "source"},
		`{"contact":{"email":"new@x.co"}}`:              {400, "malformed_request", ""},
		`{"id":"lea_x"}`:                                {400, "malformed_request", ""},
		`{"value":{"amount":1.5}}`:                      {400, "malformed_request", ""},
		`{"externalId":"form-2"}`:                       {409, "duplicate", ""},
		`{"message":"` + servertest.Long(5001) + `"}`:   {422, "validation_failed", "message"},
		`{"value":{"amount":-1}}`:                       {422, "validation_failed", "value.amount"},
		`{"title":"` + servertest.Long(256) + `"}`:      {422, "validation_failed", "title"},
		`{"campaign":"` + servertest.Long(256) + `"}`:   {422, "validation_failed", "campaign"},
		`{"externalId":"` + servertest.Long(256) + `"}`: {422, "validation_failed", "externalId"},
		`{"source":"` + servertest.Long(65) + `"}`:      {422, "validation_failed", "source"},
		`{"value":{"currency":"XYZ"}}`:                  {422, "validation_failed", "value.currency"},
		`{"status":"converted","title":"ok"}`:           {200, "", ""},
	} {
		s, p := patch(body)
		if s != want.status || want.code != "" && p["code"] != want.code {
			t.Errorf("PATCH %.50s: %d %v, want %d %s", body, s, p, want.status, want.code)
			continue
		}
		if want.code == "duplicate" && p["existingId"] != second {
			t.Errorf("PATCH %s: existingId %v, want %s", body, p["existingId"], second)
		}
		if want.field != "" && !servertest.HasViolation(p, want.field) {
			t.Errorf("PATCH %s: no violation of %s in %v", body, want.field, p)
		}
	}
	if s, _, b := h.Do(http.MethodPatch, path, other.Token, "application/merge-patch+json", `{"status":"converted"}`); s != 404 {
		t.Errorf("PATCH from another workspace: %d %s", s, b)
	}
}

// TestClearingADefaultTitleAgainIsNotAChange: a lead whose title already
// is its default (its contact's name) is unchanged by a PATCH that clears
// the title, over REST and RPC: its ETag and updatedAt stay, as for any
// other patch to the values a record already has. Clearing a title that
// differs from the default is a change.
func TestClearingADefaultTitleAgainIsNotAChange(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Default Title Co")
	status, hdr, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"d@x.co","firstName":"Dee"},"title":"Deal"}`)
	if status != 201 {
		t.Fatalf("create: %d %s", status, b)
	}
	lead := servertest.Decode(t, b)
	path := "/api/v1/leads/" + lead["id"].(string)
	tag := hdr.Get("ETag")
	status, hdr, b = h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", `{"title":null}`)
	cleared := servertest.Decode(t, b)
	if status != 200 || cleared["title"] != "Dee" || hdr.Get("ETag") == tag || cleared["updatedAt"] == lead["updatedAt"] {
		t.Fatalf("clearing title Deal: %d %v %s, want the default Dee with a new ETag and updatedAt", status, hdr.Get("ETag"), b)
	}
	tag = hdr.Get("ETag")
	for _, body := range []string{`{"title":null}`, `{"title":""}`, `{"title":"  ","status":"new"}`} {
		status, hdr, b = h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", body)
		if p := servertest.Decode(t, b); status != 200 || p["title"] != "Dee" || hdr.Get("ETag") != tag || p["updatedAt"] != cleared["updatedAt"] {
			t.Errorf("PATCH %s on a default title: %d %s %s, want ETag %s and updatedAt %v unchanged", body, status, hdr.Get("ETag"), b, tag, cleared["updatedAt"])
		}
	}
	lc := leadv1connect.NewLeadServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	res, err := lc.UpdateLead(context.Background(), connect.NewRequest(&leadv1.UpdateLeadRequest{
		Id: lead["id"].(string), Lead: &leadv1.Lead{}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title"}}}))
	if err != nil || res.Header().Get("ETag") != tag || res.Msg.GetLead().GetTitle() != "Dee" {
		t.Errorf("UpdateLead clearing a default title: %v %v, want ETag %s unchanged", res, err, tag)
	}
}
