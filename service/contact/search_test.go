package contact_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// defineField creates a custom field of object in the tenant's workspace,
// straight in the database (the definitions' API is built elsewhere).
func defineField(t *testing.T, h *servertest.Harness, tn servertest.Tenant, object, key, typ string, options ...string) {
	t.Helper()
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
	arg := dbsqlc.CustomFieldCreateParams{WorkspaceID: ws, ID: uuid.New(), Object: object, Key: key, Label: key, Type: typ}
	if len(options) > 0 {
		var opts []map[string]string
		for _, o := range options {
			opts = append(opts, map[string]string{"value": o, "label": o})
		}
		arg.Options, _ = json.Marshal(opts)
	}
	if _, err := db.Q.CustomFieldCreate(context.Background(), h.DB.Conn(), arg); err != nil {
		t.Fatal(err)
	}
}

// contactRow is a contact inserted straight in the database.
type contactRow struct {
	email, first, last, company, phone, externalID string
	// custom is its custom_fields as stored ("" for none).
	custom string
}

// insertContacts inserts rows into the tenant's workspace, one
// millisecond apart in creation (the first oldest), and returns their
// ids.
func insertContacts(t *testing.T, h *servertest.Harness, tn servertest.Tenant, rows ...contactRow) []string {
	t.Helper()
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	nul := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	var ids []string
	for i, r := range rows {
		id := opaqueid.New()
		at := base.Add(time.Duration(i) * time.Millisecond)
		_, err := dbtest.Raw(t, h.DB).Exec(context.Background(), `
			INSERT INTO contacts (workspace_id, id, email, first_name, last_name, company_name, phone, external_id, custom_fields, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $10)`,
			ws, id, nul(r.email), nul(r.first), nul(r.last), nul(r.company), nul(r.phone), nul(r.externalID), nul(r.custom), at)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, opaqueid.Format(opaqueid.Contact, id))
	}
	waitSynced(t, h, tn.Token, "/api/v1/contacts", ids)
	return ids
}

// waitSynced waits until the sync order (sort=updatedAt) shows every one
// of ids: it passes a change once no older transaction is open in the
// cluster, which other tests running beside this one hold back for a
// while on a busy machine.
func waitSynced(t *testing.T, h *servertest.Harness, token, path string, ids []string) {
	t.Helper()
	q := url.Values{"sort": {"updatedAt"}, "limit": {"100"}}
	if !dbtest.Until(15*time.Second, func() bool {
		seen := servertest.Walk(t, h, token, path, q)
		for _, id := range ids {
			if !slices.Contains(seen, id) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the sync order does not show the inserted records after 15 s")
	}
}

// listIDs walks a list with the query q and returns the ids, in order.
func listIDs(t *testing.T, h *servertest.Harness, token, path string, q url.Values) []string {
	t.Helper()
	return servertest.Walk(t, h, token, path, q)
}

// want is the ids of ids at the indexes, in the order of a -createdAt
// list (newest first).
func want(ids []string, idx ...int) []string {
	out := []string{}
	for _, i := range idx {
		out = append(out, ids[i])
	}
	slices.Reverse(out)
	return out
}

// assertBadParam checks a 400 problem naming the parameter.
func assertBadParam(t *testing.T, h *servertest.Harness, token, path, query, param string) {
	t.Helper()
	status, hdr, body := h.Do(http.MethodGet, path+"?"+query, token, "", "")
	if status != 400 || hdr.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%s?%s: %d %s", path, query, status, body)
	}
	p := servertest.Decode(t, body)
	if !servertest.HasViolation(p, param) && !strings.Contains(p["detail"].(string), param) {
		t.Fatalf("%s?%s: the problem does not name %s: %s", path, query, param, body)
	}
}

// TestCustomFieldFiltersMatchByType: customFields.<key>=<value> is an exact
// match of the value parsed as the field's type (a multiselect: holding
// the option), .gte and .lte compare numbers, dates and datetimes as such,
// and another workspace's records with the same values never show.
func TestCustomFieldFiltersMatchByType(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Filters Co")
	other := h.NewFastTenant("Filters Other")
	for _, ten := range []servertest.Tenant{tn, other} {
		defineField(t, h, ten, "contact", "note", "text")
		defineField(t, h, ten, "contact", "budget", "number")
		defineField(t, h, ten, "contact", "vip", "boolean")
		defineField(t, h, ten, "contact", "since", "date")
		defineField(t, h, ten, "contact", "seen_at", "datetime")
		defineField(t, h, ten, "contact", "tier", "select", "gold", "silver")
		defineField(t, h, ten, "contact", "tags", "multiselect", "a", "b", "c")
		defineField(t, h, ten, "contact", "site", "url")
		defineField(t, h, ten, "contact", "owner", "email")
	}
	ids := insertContacts(t, h, tn,
		contactRow{email: "zero@x.co", custom: `{"note": "hello", "budget": 9, "vip": true, "since": "2026-01-05", "seen_at": "2026-01-05T10:00:00.5Z",
			"tier": "gold", "tags": ["a", "b"], "site": "https://zero.example/", "owner": "ann@x.co"}`},
		contactRow{email: "one@x.co", custom: `{"note": "Hello", "budget": 10, "vip": false, "since": "2026-02-01", "seen_at": "2026-02-01T00:00:00Z",
			"tier": "silver", "tags": ["b"], "site": "https://one.example/", "owner": "bob@x.co"}`},
		contactRow{email: "two@x.co", custom: `{"budget": 1500.5, "tags": ["c"]}`},
		contactRow{email: "three@x.co"},
	)
	// The other workspace holds every value too: never seen.
	insertContacts(t, h, other,
		contactRow{email: "zero@x.co", custom: `{"note": "hello", "budget": 9, "vip": true, "since": "2026-01-05", "seen_at": "2026-01-05T10:00:00.5Z",
			"tier": "gold", "tags": ["a", "b"], "site": "https://zero.example/", "owner": "ann@x.co"}`},
		contactRow{email: "two@x.co", custom: `{"budget": 1500.5, "tags": ["c"]}`})

	for _, c := range []struct {
		query string
		want  []string
	}{
		{"customFields.note=hello", want(ids, 0)},
		{"customFields.note=+hello+", want(ids, 0)}, // trimmed, as text is stored
		{"customFields.budget=9", want(ids, 0)},
		{"customFields.budget=9.0", want(ids, 0)}, // a number, not its spelling
		{"customFields.budget=1500.5", want(ids, 2)},
		{"customFields.vip=true", want(ids, 0)},
		{"customFields.vip=false", want(ids, 1)},
		{"customFields.since=2026-02-01", want(ids, 1)},
		{"customFields.seen_at=2026-01-05T11:00:00.500%2B01:00", want(ids, 0)}, // the same instant
		{"customFields.tier=silver", want(ids, 1)},
		{"customFields.tags=b", want(ids, 0, 1)},
		{"customFields.tags=c", want(ids, 2)},
		{"customFields.site=https://one.example/", want(ids, 1)},
		{"customFields.owner=ANN@x.co", want(ids, 0)}, // normalised as an email
		{"customFields.budget.gte=10", want(ids, 1, 2)},
		{"customFields.budget.lte=10", want(ids, 0, 1)},
		{"customFields.budget.gte=9.5&customFields.budget.lte=1000", want(ids, 1)},
		{"customFields.since.gte=2026-01-06", want(ids, 1)},
		{"customFields.seen_at.lte=2026-01-05T10:00:00.6Z", want(ids, 0)},
		{"customFields.seen_at.gte=2026-01-05T10:00:00.6Z", want(ids, 1)},
		{"customFields.tags=b&customFields.tier=gold", want(ids, 0)},
		{"customFields.tags=a&customFields.budget.gte=10", want(ids)},
		{"customFields.tags=b&email=one@x.co", want(ids, 1)},
	} {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		for _, sort := range []string{"-createdAt", "createdAt", "-updatedAt", "updatedAt"} {
			q.Set("sort", sort)
			q.Set("limit", "1")
			q.Del("cursor")
			got := listIDs(t, h, tn.Token, "/api/v1/contacts", q)
			w := slices.Clone(c.want)
			if sort == "createdAt" || sort == "updatedAt" {
				slices.Reverse(w)
			}
			if !slices.Equal(got, w) {
				t.Errorf("%s sort %s: got %v, want %v", c.query, sort, got, w)
			}
		}
	}

	// Over Connect, the same filters are the request's custom_fields map.
	cc := contactv1connect.NewContactServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	res, err := cc.ListContacts(context.Background(), connect.NewRequest(&contactv1.ListContactsRequest{
		CustomFields: map[string]string{"tags": "b", "budget.gte": "10"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msg.Contacts) != 1 || res.Msg.Contacts[0].GetId() != ids[1] {
		t.Fatalf("Connect: got %v, want %s", res.Msg.Contacts, ids[1])
	}
	_, err = cc.ListContacts(context.Background(), connect.NewRequest(&contactv1.ListContactsRequest{
		CustomFields: map[string]string{"nope": "1"},
	}))
	servertest.AssertField(t, "Connect unknown key", servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request"), "customFields.nope")
}

// TestCustomFieldFilterErrors: an unknown key, an operator the type does
// not have, and a value that does not parse as the field's type are 400s
// naming the parameter; a cursor is bound to the filters.
func TestCustomFieldFilterErrors(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Filter Errors")
	other := h.NewFastTenant("Filter Errors Other")
	defineField(t, h, tn, "contact", "note", "text")
	defineField(t, h, tn, "contact", "budget", "number")
	defineField(t, h, tn, "contact", "vip", "boolean")
	defineField(t, h, tn, "contact", "since", "date")
	defineField(t, h, tn, "contact", "seen_at", "datetime")
	defineField(t, h, tn, "contact", "tier", "select", "gold")
	defineField(t, h, tn, "contact", "tags", "multiselect", "a")
	defineField(t, h, tn, "contact", "site", "url")
	defineField(t, h, tn, "contact", "owner", "email")
	defineField(t, h, other, "contact", "elsewhere", "text")
	defineField(t, h, tn, "lead", "lead_only", "text")
	for query, param := range map[string]string{
		"customFields.nope=1":                            "customFields.nope",
		"customFields.elsewhere=1":                       "customFields.elsewhere", // another workspace's key
		"customFields.lead_only=1":                       "customFields.lead_only", // a lead's key
		"customFields.budget=abc":                        "customFields.budget",
		"customFields.budget=1e999":                      "customFields.budget",
		"customFields.budget=0x10":                       "customFields.budget",
		"customFields.budget.gte=ten":                    "customFields.budget.gte",
		"customFields.vip=yes":                           "customFields.vip",
		"customFields.since=2026-02-30":                  "customFields.since",
		"customFields.since.lte=yesterday":               "customFields.since.lte",
		"customFields.seen_at=2026-01-05":                "customFields.seen_at",
		"customFields.tier=platinum":                     "customFields.tier",
		"customFields.tags=z":                            "customFields.tags",
		"customFields.site=ftp://x.example/":             "customFields.site",
		"customFields.owner=not-an-email":                "customFields.owner",
		"customFields.note.gte=a":                        "customFields.note.gte",
		"customFields.tier.lte=gold":                     "customFields.tier.lte",
		"customFields.note=%20":                          "customFields.note",
		"customFields.note=" + strings.Repeat("x", 1001): "customFields.note",
		"customFields=1":                                 "customFields",
	} {
		assertBadParam(t, h, tn.Token, "/api/v1/contacts", query, param)
	}
	many := url.Values{}
	for i := range 21 {
		many.Set("customFields.x"+string(rune('a'+i)), "1")
	}
	assertBadParam(t, h, tn.Token, "/api/v1/contacts", many.Encode(), "customFields")

	// A cursor is bound to the filters: reused with another value, or
	// without the filter, it is a 400.
	insertContacts(t, h, tn, contactRow{email: "a@x.co", custom: `{"budget": 1}`}, contactRow{email: "b@x.co", custom: `{"budget": 1}`},
		contactRow{email: "c@x.co", custom: `{"budget": 2}`})
	status, _, body := h.Do(http.MethodGet, "/api/v1/contacts?limit=1&customFields.budget=1", tn.Token, "", "")
	var p servertest.Page
	servertest.MustUnmarshal(t, body, &p)
	if status != 200 || len(p.Contacts) != 1 || p.Pagination.NextCursor == nil {
		t.Fatalf("first page: %d %s", status, body)
	}
	cur := url.QueryEscape(*p.Pagination.NextCursor)
	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts?limit=1&customFields.budget=1.0&cursor="+cur, tn.Token, "", ""); s != 200 {
		t.Fatalf("the same filter spelt otherwise: %d %s", s, b)
	}
	for _, q := range []string{"customFields.budget=2", "customFields.budget.gte=1", "", "q=bcd"} {
		assertBadParam(t, h, tn.Token, "/api/v1/contacts", "limit=1&cursor="+cur+"&"+q, "cursor")
	}
}

// TestSearchFoldsCaseAndAccents: every word of q is a case- and
// accent-insensitive substring of one field; a word never spans two
// fields; q combines with filters, sorts and cursors; its length is
// bounded.
func TestSearchFoldsCaseAndAccents(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Search Co")
	other := h.NewFastTenant("Search Other")
	defineField(t, h, tn, "contact", "tier", "select", "gold", "silver")
	ids := insertContacts(t, h, tn,
		contactRow{email: "elodie@ex.co", first: "Élodie", last: "Dupré", company: "Crème Brûlée SA", custom: `{"tier": "gold"}`},
		contactRow{email: "ann@ex.co", first: "Ann", last: "Lee", company: "ACME", phone: "+14155550123", externalID: "CRM-77"},
		contactRow{email: "dupre@other.co", first: "Jean", last: "DUPRE", custom: `{"tier": "silver"}`},
		contactRow{email: "50%off@ex.co", first: "Under_Score"},
	)
	insertContacts(t, h, other, contactRow{email: "elodie@ex.co", first: "Élodie", last: "Dupré"})
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"elodie", want(ids, 0)},
		{"ÉLODIE", want(ids, 0)},
		{"dupre", want(ids, 0, 2)},
		{"DUPRÉ élodie", want(ids, 0)},     // every word, in any field
		{"  dupre   jean  ", want(ids, 2)}, // white space splits
		{"creme brulee", want(ids, 0)},     // company
		{"4155550", want(ids, 1)},          // phone
		{"crm-77", want(ids, 1)},           // externalId
		{"ex.co", want(ids, 0, 1, 3)},      // email
		{"annlee", want(ids)},              // no word spans two fields
		{"nlee", want(ids)},                // first name's end, last name's start
		{"acme+1415", want(ids)},           // "+" is part of the word
		{"50%", want(ids, 3)},              // % is a character, not a wildcard
		{"5%f", want(ids)},
		{"e_o", want(ids)}, // _ too ("e@o" is in dupre@other.co)
		{"r_sc", want(ids, 3)},
		{"dupre elodie zzz", want(ids)},
	} {
		for _, sort := range []string{"-createdAt", "createdAt", "updatedAt"} {
			q := url.Values{"q": {c.q}, "limit": {"1"}, "sort": {sort}}
			got := listIDs(t, h, tn.Token, "/api/v1/contacts", q)
			w := slices.Clone(c.want)
			if sort != "-createdAt" {
				slices.Reverse(w)
			}
			if !slices.Equal(got, w) {
				t.Errorf("q=%q sort %s: got %v, want %v", c.q, sort, got, w)
			}
		}
	}
	// With other filters.
	for query, w := range map[string][]string{
		"q=dupre&customFields.tier=silver": want(ids, 2),
		"q=dupre&email=elodie@ex.co":       want(ids, 0),
		"q=ex.co&createdSince=" + url.QueryEscape(time.Now().Add(-2*time.Hour).UTC().Format(time.RFC3339)): want(ids, 0, 1, 3),
	} {
		q, _ := url.ParseQuery(query)
		if got := listIDs(t, h, tn.Token, "/api/v1/contacts", q); !slices.Equal(got, w) {
			t.Errorf("%s: got %v, want %v", query, got, w)
		}
	}
	for _, q := range []string{"a", " a ", strings.Repeat("x", 101), "é"} {
		assertBadParam(t, h, tn.Token, "/api/v1/contacts", url.Values{"q": {q}}.Encode(), "q")
	}
	if got := listIDs(t, h, tn.Token, "/api/v1/contacts", url.Values{"q": {strings.Repeat("é", 100)}}); len(got) != 0 {
		t.Errorf("100 characters: %v", got)
	}
	// A cursor is bound to q.
	status, _, body := h.Do(http.MethodGet, "/api/v1/contacts?limit=1&q=dupre", tn.Token, "", "")
	var p servertest.Page
	servertest.MustUnmarshal(t, body, &p)
	if status != 200 || p.Pagination.NextCursor == nil {
		t.Fatalf("first page: %d %s", status, body)
	}
	assertBadParam(t, h, tn.Token, "/api/v1/contacts", "limit=1&q=elodie&cursor="+url.QueryEscape(*p.Pagination.NextCursor), "cursor")

	// Over Connect.
	cc := contactv1connect.NewContactServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	res, err := cc.ListContacts(context.Background(), connect.NewRequest(&contactv1.ListContactsRequest{Q: "élodie DUPRE"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msg.Contacts) != 1 || res.Msg.Contacts[0].GetId() != ids[0] {
		t.Fatalf("Connect: got %v, want %s", res.Msg.Contacts, ids[0])
	}
	_, err = cc.ListContacts(context.Background(), connect.NewRequest(&contactv1.ListContactsRequest{Q: "x"}))
	servertest.AssertField(t, "Connect short q", servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request"), "q")
}
