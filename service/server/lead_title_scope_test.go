package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// What the workspace holds about a contact: a token without contacts:read
// must find none of it in the title of a lead it creates.
const (
	storedEmail = "ada@stored.test"
	storedPhone = "+14155550100"
	storedFirst = "Augusta"
	storedLast  = "Lovelace"
	storedName  = storedFirst + " " + storedLast
)

// titleTenant is a workspace holding the stored contact, with a token of
// each kind: writer has leads:write alone, reader also contacts:read.
type titleTenant struct {
	servertest.Tenant
	contactID, writer, reader string
}

func newTitleTenant(t *testing.T, h *servertest.Harness, name string) titleTenant {
	t.Helper()
	tn := titleTenant{Tenant: h.NewFastTenant(name)}
	status, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json",
		`{"email":"`+storedEmail+`","phone":"`+storedPhone+`","firstName":"`+storedFirst+`","lastName":"`+storedLast+`"}`)
	if status != 201 {
		t.Fatalf("create the stored contact: %d %s", status, b)
	}
	tn.contactID = servertest.ID(t, b)
	id, sec := h.FastClient(tn.WorkspaceID, tn.MemberID, "leads:write")
	tn.writer = h.Token(id, sec, "")
	id, sec = h.FastClient(tn.WorkspaceID, tn.MemberID, "leads:write", "contacts:read")
	tn.reader = h.Token(id, sec, "")
	return tn
}

// leadCreate creates in as token does over one surface, with the
// Idempotency-Key key unless it is empty, and returns the lead, whether it
// was replayed, and the problem code of a refusal ("" when created).
type leadCreate func(t *testing.T, token, key string, in *leadv1.Lead) (lead *leadv1.Lead, replayed bool, code string)

// leadCreates are the ways to create a lead: single and batch, over REST
// and Connect.
func leadCreates(h *servertest.Harness) map[string]leadCreate {
	rpc := func(token string) leadv1connect.LeadServiceClient {
		return leadv1connect.NewLeadServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(bearerInterceptor(token)))
	}
	rpcCode := func(t *testing.T, err error) string {
		t.Helper()
		var ce *connect.Error
		if !errors.As(err, &ce) || errorInfo(ce) == nil {
			t.Fatalf("create: %v", err)
		}
		return errorInfo(ce).GetReason()
	}
	rest := func(t *testing.T, token, key, path string, in proto.Message, out proto.Message) (replayed bool, code string) {
		t.Helper()
		body, err := protojson.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var headers []string
		if key != "" {
			headers = []string{"Idempotency-Key", key}
		}
		status, hdr, b := h.Do(http.MethodPost, path, token, "application/json", string(body), headers...)
		if status >= 300 {
			code, _ := decode(t, b)["code"].(string)
			if code == "" {
				t.Fatalf("POST %s: %d %s", path, status, b)
			}
			return false, code
		}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s: %v: %s", path, err, b)
		}
		return hdr.Get("Idempotent-Replayed") == "true", ""
	}
	batchLead := func(t *testing.T, res *leadv1.BatchCreateLeadsResponse) *leadv1.Lead {
		t.Helper()
		if len(res.GetResults()) != 1 || res.GetResults()[0].GetLead() == nil {
			t.Fatalf("batch of one answered %v", res)
		}
		return res.GetResults()[0].GetLead()
	}
	return map[string]leadCreate{
		"REST": func(t *testing.T, token, key string, in *leadv1.Lead) (*leadv1.Lead, bool, string) {
			t.Helper()
			out := &leadv1.Lead{}
			replayed, code := rest(t, token, key, "/api/v1/leads", in, out)
			return out, replayed, code
		},
		"REST batch": func(t *testing.T, token, key string, in *leadv1.Lead) (*leadv1.Lead, bool, string) {
			t.Helper()
			out := &leadv1.BatchCreateLeadsResponse{}
			replayed, code := rest(t, token, key, "/api/v1/leads/batch", &leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{in}}, out)
			if code != "" {
				return nil, false, code
			}
			return batchLead(t, out), replayed, ""
		},
		"Connect": func(t *testing.T, token, key string, in *leadv1.Lead) (*leadv1.Lead, bool, string) {
			t.Helper()
			req := connect.NewRequest(&leadv1.CreateLeadRequest{Lead: in})
			if key != "" {
				req.Header().Set("Idempotency-Key", key)
			}
			res, err := rpc(token).CreateLead(context.Background(), req)
			if err != nil {
				return nil, false, rpcCode(t, err)
			}
			return res.Msg.GetLead(), res.Header().Get("Idempotent-Replayed") == "true", ""
		},
		"Connect batch": func(t *testing.T, token, key string, in *leadv1.Lead) (*leadv1.Lead, bool, string) {
			t.Helper()
			req := connect.NewRequest(&leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{in}})
			if key != "" {
				req.Header().Set("Idempotency-Key", key)
			}
			res, err := rpc(token).BatchCreateLeads(context.Background(), req)
			if err != nil {
				return nil, false, rpcCode(t, err)
			}
			return batchLead(t, res.Msg), res.Header().Get("Idempotent-Replayed") == "true", ""
		},
	}
}

func inline(email string, names ...string) *leadv1.Lead {
	c := &leadv1.LeadContact{Email: &email}
	if len(names) == 2 {
		c.FirstName, c.LastName = &names[0], &names[1]
	}
	return &leadv1.Lead{Contact: c, Source: ptr("web_form")}
}

// showsStoredContact reports whether title holds a field of the stored
// contact that the request did not send (its name, its phone, and its
// email unless sent).
func showsStoredContact(title string, sentEmail bool) bool {
	for _, s := range []string{storedFirst, storedLast, storedPhone} {
		if strings.Contains(title, s) {
			return true
		}
	}
	return !sentEmail && strings.Contains(title, storedEmail)
}

// TestWriteOnlyTokenLeadTitleShowsNoStoredContact: a token with
// leads:write alone that creates a lead about an existing contact, inline
// by its email or by contactId, single or batch, over REST or Connect, is
// answered a default title made of what it sent (the inline contact's
// "First Last", else its email) or "Lead", never the stored contact's
// name or phone; the lead keeps that title. A new inline contact's lead is
// titled from the request as before.
func TestWriteOnlyTokenLeadTitleShowsNoStoredContact(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := newTitleTenant(t, h, "Write Only Titles")
	for surface, create := range leadCreates(h) {
		t.Run(surface, func(t *testing.T) {
			fresh := strings.ReplaceAll(strings.ToLower(surface), " ", "-") + "@new.test"
			for _, c := range []struct {
				name      string
				in        *leadv1.Lead
				want      string
				sentEmail bool
			}{
				{"inline email of a stored contact", inline(storedEmail), storedEmail, true},
				{"inline email of a stored contact with other names", inline(storedEmail, "Grace", "Hopper"), "Grace Hopper", true},
				{"contactId", &leadv1.Lead{ContactId: tn.contactID}, "Lead", false},
				{"new inline contact with names", inline(fresh, "Grace", "Hopper"), "Grace Hopper", true},
			} {
				l, _, code := create(t, tn.writer, "", c.in)
				if code != "" {
					t.Fatalf("%s: refused %s", c.name, code)
				}
				if l.GetTitle() != c.want || showsStoredContact(l.GetTitle(), c.sentEmail) {
					t.Errorf("%s: title %q, want %q", c.name, l.GetTitle(), c.want)
				}
				if found := c.in.GetContact().GetEmail() != fresh; found != (l.GetContactId() == tn.contactID) {
					t.Errorf("%s: contactId %s, stored contact %s", c.name, l.GetContactId(), tn.contactID)
				}
				_, _, b := h.Do(http.MethodGet, "/api/v1/leads/"+l.GetId(), tn.Token, "", "")
				if got := decode(t, b)["title"]; got != c.want {
					t.Errorf("%s: the lead is stored titled %v, want %q", c.name, got, c.want)
				}
			}
		})
	}
}

// TestInlineContactExistenceLooksTheSameToWriteOnlyToken: to a token with
// leads:write alone, a lead whose inline contact's email is already a
// contact's (stored with other names) is answered exactly as one whose
// email is new, but for its ids and times, on every surface.
func TestInlineContactExistenceLooksTheSameToWriteOnlyToken(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := newTitleTenant(t, h, "Existence Titles")
	for surface, create := range leadCreates(h) {
		t.Run(surface, func(t *testing.T) {
			slug := strings.ReplaceAll(strings.ToLower(surface), " ", "-")
			known, unknown := slug+"@known.test", slug+"@unknown.test"
			if s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json",
				`{"email":"`+known+`","firstName":"Kit","lastName":"Known"}`); s != 201 {
				t.Fatalf("create contact: %d %s", s, b)
			}
			shape := func(email string) *leadv1.Lead {
				l, replayed, code := create(t, tn.writer, "", inline(email, "Sam", "Roe"))
				if code != "" || replayed {
					t.Fatalf("create about %s: %s, replayed %v", email, code, replayed)
				}
				l = proto.Clone(l).(*leadv1.Lead)
				l.Id, l.ContactId, l.CreatedAt, l.UpdatedAt = "", "", nil, nil
				return l
			}
			if a, b := shape(known), shape(unknown); !proto.Equal(a, b) || a.GetTitle() != "Sam Roe" {
				t.Errorf("existing email answered %v, new email %v", a, b)
			}
		})
	}
}

// TestContactsReaderLeadTitleIsStoredContactName: a token with
// contacts:read as well still gets the default title made from the
// contact as stored, on every surface.
func TestContactsReaderLeadTitleIsStoredContactName(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := newTitleTenant(t, h, "Reader Titles")
	for surface, create := range leadCreates(h) {
		t.Run(surface, func(t *testing.T) {
			for name, in := range map[string]*leadv1.Lead{
				"inline email":                  inline(storedEmail),
				"inline email with other names": inline(storedEmail, "Grace", "Hopper"),
				"contactId":                     {ContactId: tn.contactID},
			} {
				if l, _, code := create(t, tn.reader, "", in); code != "" || l.GetTitle() != storedName {
					t.Errorf("%s: title %q (%s), want %q", name, l.GetTitle(), code, storedName)
				}
			}
		})
	}
}

// TestLeadCreateReplayShowsNoStoredContact: with an Idempotency-Key, a
// write-only token's retry replays its first answer, which has no stored
// contact data; and a token of the same client without contacts:read that
// sends the key and body another token with contacts:read created a lead
// with is refused (422) rather than replayed that lead, whose title is the
// stored contact's name.
func TestLeadCreateReplayShowsNoStoredContact(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := newTitleTenant(t, h, "Replay Titles")
	wide := h.Token(tn.ClientID, tn.ClientSecret, "")
	narrow := h.Token(tn.ClientID, tn.ClientSecret, "leads:write")
	for surface, create := range leadCreates(h) {
		t.Run(surface, func(t *testing.T) {
			key := "replay-" + surface
			in := inline(storedEmail)
			first, _, code := create(t, tn.writer, key, in)
			again, replayed, code2 := create(t, tn.writer, key, in)
			if code != "" || code2 != "" || !replayed || again.GetId() != first.GetId() || again.GetTitle() != storedEmail {
				t.Errorf("write-only retry: %v %s then %v %s replayed %v, want a replay titled %q", first, code, again, code2, replayed, storedEmail)
			}

			key = "wide-" + surface
			in = &leadv1.Lead{ContactId: tn.contactID}
			if l, _, code := create(t, wide, key, in); code != "" || l.GetTitle() != storedName {
				t.Fatalf("create with contacts:read: %v %s, want the title %q", l, code, storedName)
			}
			l, replayed, code := create(t, narrow, key, in)
			if code != "idempotency_key_reused" || showsStoredContact(l.GetTitle(), false) {
				t.Errorf("replay without contacts:read: %v replayed %v %q, want idempotency_key_reused", l, replayed, code)
			}
		})
	}
}

// TestClearedLeadTitleOfWriteOnlyTokenShowsNoStoredContact: a token with
// leads:write alone that clears a lead's title (REST null, Connect mask)
// gets "Lead", not the contact's name, which only a token with
// contacts:read gets back.
func TestClearedLeadTitleOfWriteOnlyTokenShowsNoStoredContact(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := newTitleTenant(t, h, "Cleared Titles")
	status, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+tn.contactID+`","title":"Deal"}`)
	if status != 201 {
		t.Fatalf("create lead: %d %s", status, b)
	}
	id := servertest.ID(t, b)
	clear := func(token string) any {
		t.Helper()
		status, _, b := h.Do(http.MethodPatch, "/api/v1/leads/"+id, token, "application/merge-patch+json", `{"title":null}`)
		if status != 200 {
			t.Fatalf("PATCH: %d %s", status, b)
		}
		return decode(t, b)["title"]
	}
	if got := clear(tn.writer); got != "Lead" {
		t.Errorf("write-only PATCH title null: %v, want Lead", got)
	}
	if got := clear(tn.reader); got != storedName {
		t.Errorf("contacts:read PATCH title null: %v, want %q", got, storedName)
	}
	lc := leadv1connect.NewLeadServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(bearerInterceptor(tn.writer)))
	res, err := lc.UpdateLead(context.Background(), connect.NewRequest(&leadv1.UpdateLeadRequest{
		Id: id, Lead: &leadv1.Lead{}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title"}}}))
	if err != nil || res.Msg.GetLead().GetTitle() != "Lead" {
		t.Errorf("write-only UpdateLead clearing the title: %v %v, want Lead", res, err)
	}
}
