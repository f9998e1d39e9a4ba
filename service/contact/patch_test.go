package contact_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// TestPatchContact: JSON merge patch semantics (a sent field is set, null
// clears, absent keeps), validation and normalisation of a create,
// read-only fields, duplicates, If-Match and tenant isolation.
func TestPatchContact(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Patch Co")
	other := h.NewTenant("Patch Elsewhere")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json",
		`{"email":"ada@x.co","phone":"+14155550123","firstName":"Ada","lastName":"Lovelace","jobTitle":"Analyst","externalId":"crm-1"}`)
	ada := servertest.Decode(t, b)
	id := ada["id"].(string)
	_, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"grace@x.co","externalId":"crm-2"}`)
	grace := servertest.ID(t, b)
	path := "/api/v1/contacts/" + id
	patch := func(body string, headers ...string) (int, http.Header, map[string]any) {
		t.Helper()
		s, hdr, b := h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", body, headers...)
		return s, hdr, servertest.Decode(t, b)
	}

	h.WaitPastStamp(t, ada["updatedAt"].(string)) // so that updatedAt visibly moves
	status, hdr, c := patch(`{"firstName":"Augusta","phone":null,"email":"  ADA.King@X.co "}`)
	if status != 200 || c["firstName"] != "Augusta" || c["lastName"] != "Lovelace" || c["jobTitle"] != "Analyst" ||
		c["email"] != "ada.king@x.co" || c["externalId"] != "crm-1" || c["createdAt"] != ada["createdAt"] {
		t.Fatalf("merge patch: %d %v", status, c)
	}
	if _, ok := c["phone"]; ok {
		t.Errorf("phone was not cleared by null: %v", c)
	}
	if c["updatedAt"].(string) <= ada["updatedAt"].(string) {
		t.Errorf("updatedAt did not move: %v -> %v", ada["updatedAt"], c["updatedAt"])
	}
	tag := hdr.Get("ETag")
	_, getHdr, got := h.Do(http.MethodGet, path, tn.Token, "", "")
	if getHdr.Get("ETag") != tag || servertest.Decode(t, got)["firstName"] != "Augusta" {
		t.Fatalf("GET after PATCH: %v %s, want ETag %s", getHdr, got, tag)
	}

	// application/json is a merge patch too; an empty patch changes nothing.
	if s, hdr, b := h.Do(http.MethodPatch, path, tn.Token, "application/json", `{}`); s != 200 || hdr.Get("ETag") != tag || servertest.Decode(t, b)["updatedAt"] != c["updatedAt"] {
		t.Errorf("empty patch: %d %v %s", s, hdr, b)
	}
	if s, _, b := h.Do(http.MethodPatch, path, tn.Token, "text/plain", `{}`); s != 415 {
		t.Errorf("text/plain patch: %d %s", s, b)
	}

	// Malformed (400) and invalid (422) patches change nothing.
	for body, want := range map[string]struct {
		status      int
		code, field string
	}{
		`{"id":"con_x"}`:                       {400, "malformed_request", ""},
		`{"createdAt":"2020-01-01T00:00:00Z"}`: {400, "malformed_request", ""},
		`{"updatedAt":null}`:                   {400, "malformed_request", ""},
		`{"nickname":"x"}`:                     {400, "malformed_request", ""},
		`[]`:                                   {400, "malformed_request", ""},
		`{"email":`:                            {400, "malformed_request", ""},
		`{"email":"not-an-email"}`:             {422, "validation_failed", "email"},
		`{"email":null}`:                       {422, "validation_failed", "email"},
		`{"firstName":"` + servertest.Long(101) + `"}`:  {422, "validation_failed", "firstName"},
		`{"externalId":"` + servertest.Long(256) + `"}`: {422, "validation_failed", "externalId"},
		`{"phone":"555"}`:                        {422, "validation_failed", "phone"},
		`{"email":"grace@x.co"}`:                 {409, "duplicate", ""},
		`{"externalId":"crm-2","lastName":"L."}`: {409, "duplicate", ""},
	} {
		s, hdr, p := patch(body)
		if s != want.status || p["code"] != want.code || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("PATCH %.40s: %d %v, want %d %s", body, s, p, want.status, want.code)
			continue
		}
		if want.code == "duplicate" && p["existingId"] != grace {
			t.Errorf("PATCH %s: existingId %v, want %s", body, p["existingId"], grace)
		}
		if want.field != "" && !servertest.HasViolation(p, want.field) {
			t.Errorf("PATCH %s: no violation of %s in %v", body, want.field, p)
		}
	}
	if _, hdr, _ := h.Do(http.MethodGet, path, tn.Token, "", ""); hdr.Get("ETag") != tag {
		t.Errorf("a refused patch changed the contact")
	}

	// If-Match: the current tag or * passes; a stale or weak one is 412.
	if s, _, p := patch(`{"jobTitle":"Countess"}`, "If-Match", `"stale", `+tag); s != 200 || p["jobTitle"] != "Countess" {
		t.Fatalf("If-Match with the current tag: %d %v", s, p)
	}
	for _, ifMatch := range []string{tag, "W/" + tag, `"something-else"`} {
		if s, hdr, p := patch(`{"jobTitle":"Lost update"}`, "If-Match", ifMatch); s != 412 || p["code"] != "precondition_failed" || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("If-Match %s: %d %v, want 412", ifMatch, s, p)
		}
	}
	if s, _, p := patch(`{"jobTitle":"Anything"}`, "If-Match", "*"); s != 200 || p["jobTitle"] != "Anything" {
		t.Errorf("If-Match *: %d %v", s, p)
	}

	// Another workspace sees a 404 and cannot change it.
	if s, _, b := h.Do(http.MethodPatch, path, other.Token, "application/merge-patch+json", `{"firstName":"Mallory"}`); s != 404 || servertest.Decode(t, b)["code"] != "not_found" {
		t.Errorf("PATCH from another workspace: %d %s", s, b)
	}
	if _, _, b := h.Do(http.MethodGet, path, tn.Token, "", ""); servertest.Decode(t, b)["firstName"] != "Augusta" {
		t.Errorf("another workspace changed the contact: %s", b)
	}
	// Only contacts:write may patch.
	readerID, readerSecret := h.Client(tn.WorkspaceID, tn.MemberID, "contacts:read", "leads:write")
	if s, hdr, _ := h.Do(http.MethodPatch, path, h.Token(readerID, readerSecret, ""), "application/merge-patch+json", `{"firstName":"X"}`); s != 403 ||
		!strings.Contains(hdr.Get("WWW-Authenticate"), `scope="contacts:write"`) {
		t.Errorf("PATCH without contacts:write: %d %v", s, hdr)
	}
}

// TestIfMatchOnSeveralLines: If-Match sent as several field lines is one
// list (RFC 9110 §5.3): the current tag on the second line matches; only
// stale tags are 412.
func TestIfMatchOnSeveralLines(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("If-Match Lines")
	_, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"lines@x.co"}`)
	path := "/api/v1/contacts/" + servertest.ID(t, b)
	patch := func(body string, ifMatch ...string) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPatch, h.Public.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		req.Header.Set("Content-Type", "application/merge-patch+json")
		for _, v := range ifMatch {
			req.Header.Add("If-Match", v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, res.Header, out
	}
	tag := hdr.Get("ETag")
	s, hdr, b := patch(`{"firstName":"Lin"}`, `"stale"`, tag)
	if s != 200 || servertest.Decode(t, b)["firstName"] != "Lin" {
		t.Fatalf("If-Match lines %q, %s: %d %s, want 200", `"stale"`, tag, s, b)
	}
	if s, _, b := patch(`{"firstName":"Lost"}`, `"stale"`, tag); s != 412 || servertest.Decode(t, b)["code"] != "precondition_failed" {
		t.Errorf("If-Match lines with only stale tags: %d %s, want 412", s, b)
	}
	if s, _, b := patch(`{"firstName":"Li"}`, `"stale"`, `W/`+hdr.Get("ETag"), hdr.Get("ETag")); s != 200 {
		t.Errorf("If-Match on three lines, the last current: %d %s", s, b)
	}
}

// TestPatchThatChangesNothingIsNotAChange: a merge patch whose fields,
// once normalised, are what the record already holds writes nothing: the
// ETag and updatedAt stay, and a syncCursor reader does not get the record
// again (it sees a record again only if it changed again). Over REST and
// over Connect with a field mask.
func TestPatchThatChangesNothingIsNotAChange(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("No-op Patch")
	_, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"ada@x.co","firstName":"Ada","externalId":"crm-1"}`)
	ada, adaTag := servertest.Decode(t, b), hdr.Get("ETag")
	_, hdr, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json",
		`{"contactId":"`+ada["id"].(string)+`","title":"Deal","status":"contacted","value":{"amount":5,"currency":"EUR"},"source":"web_form"}`)
	lead, leadTag := servertest.Decode(t, b), hdr.Get("ETag")
	_, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"marker@x.co"}`)
	marker := servertest.ID(t, b)

	// syncPages walks sort=updatedAt from cursor until a page holds want
	// (changes newer than a write transaction still open anywhere in the
	// cluster are withheld for a moment), and returns the ids it got.
	syncPages := func(resource, cursor, want string) (ids []string, next string) {
		t.Helper()
		dbtest.Until(10*time.Second, func() bool {
			ids, next = nil, ""
			c := cursor
			for {
				q := "/api/v1/" + resource + "?sort=updatedAt&limit=1"
				if c != "" {
					q += "&cursor=" + url.QueryEscape(c)
				}
				s, _, b := h.Do(http.MethodGet, q, tn.Token, "", "")
				if s != 200 {
					t.Fatalf("GET %s: %d %s", q, s, b)
				}
				var p struct {
					Contacts   []struct{ ID string } `json:"contacts"`
					Leads      []struct{ ID string } `json:"leads"`
					Pagination struct{ NextCursor, SyncCursor string }
				}
				servertest.MustUnmarshal(t, b, &p)
				for _, x := range append(p.Contacts, p.Leads...) {
					ids = append(ids, x.ID)
				}
				if p.Pagination.NextCursor == "" {
					next = p.Pagination.SyncCursor
					break
				}
				c = p.Pagination.NextCursor
			}
			return slices.Contains(ids, want)
		})
		return ids, next
	}
	_, contactCursor := syncPages("contacts", "", marker)
	_, leadCursor := syncPages("leads", "", lead["id"].(string))

	h.WaitPastStamp(t, lead["updatedAt"].(string)) // a write would move updatedAt visibly
	for _, tc := range []struct{ path, body, tag string }{
		{"/api/v1/contacts/" + ada["id"].(string), `{"email":" ADA@X.co ","firstName":"Ada","phone":null}`, adaTag},
		{"/api/v1/leads/" + lead["id"].(string), `{"status":"contacted","value":{"currency":"eur"},"title":" Deal ","campaign":null}`, leadTag},
		{"/api/v1/leads/" + lead["id"].(string), `{"contactId":"` + ada["id"].(string) + `","value":{"amount":5}}`, leadTag},
	} {
		s, hdr, b := h.Do(http.MethodPatch, tc.path, tn.Token, "application/merge-patch+json", tc.body)
		_, _, before := h.Do(http.MethodGet, tc.path, tn.Token, "", "")
		if s != 200 || hdr.Get("ETag") != tc.tag || !servertest.SameJSON(t, b, before) {
			t.Errorf("PATCH %s %s: %d ETag %s (was %s) %s", tc.path, tc.body, s, hdr.Get("ETag"), tc.tag, b)
		}
		if got := servertest.Decode(t, b)["updatedAt"]; got != ada["updatedAt"] && got != lead["updatedAt"] {
			t.Errorf("PATCH %s %s moved updatedAt to %v", tc.path, tc.body, got)
		}
	}
	cc := contactv1connect.NewContactServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	res, err := cc.UpdateContact(context.Background(), connect.NewRequest(&contactv1.UpdateContactRequest{
		Id: ada["id"].(string), Contact: &contactv1.Contact{ExternalId: servertest.Ptr("crm-1")}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"external_id", "job_title"}},
	}))
	if err != nil || res.Header().Get("ETag") != adaTag {
		t.Errorf("UpdateContact to the same values: %v, ETag %q, want %s", err, res.Header().Get("ETag"), adaTag)
	}

	// A real change after the no-op patches: a sync reader gets it, and
	// only it.
	if s, _, b := h.Do(http.MethodPatch, "/api/v1/contacts/"+marker, tn.Token, "application/merge-patch+json", `{"firstName":"Mark"}`); s != 200 {
		t.Fatalf("patch marker: %d %s", s, b)
	}
	if s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+marker+`"}`); s != 201 {
		t.Fatalf("marker lead: %d %s", s, b)
	} else {
		newLead := servertest.ID(t, b)
		if ids, _ := syncPages("leads", leadCursor, newLead); !slices.Equal(ids, []string{newLead}) {
			t.Errorf("leads changed since the sync cursor: %v, want only the new lead %s", ids, newLead)
		}
	}
	if ids, _ := syncPages("contacts", contactCursor, marker); !slices.Equal(ids, []string{marker}) {
		t.Errorf("contacts changed since the sync cursor: %v, want only the marker %s", ids, marker)
	}
}

// TestConcurrentPatchesAllApply: patches without If-Match of one record
// by many clients at once all apply (last writer wins, field by field).
// They used to answer "being changed by other requests; retry" once three
// optimistic rounds had all lost a race (about a third of them with six
// writers); the last round now locks the row, so it cannot lose.
func TestConcurrentPatchesAllApply(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Busy Record")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"busy@x.co"}`)
	contact := servertest.ID(t, b)
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+contact+`"}`)
	lead := servertest.ID(t, b)

	const writers, rounds = 8, 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for g := range writers {
		wg.Go(func() {
			for i := range rounds {
				for _, p := range []struct{ path, body string }{
					{"/api/v1/contacts/" + contact, fmt.Sprintf(`{"jobTitle":"t%d-%d"}`, g, i)},
					{"/api/v1/leads/" + lead, fmt.Sprintf(`{"campaign":"c%d-%d"}`, g, i)},
				} {
					s, _, b := h.Do(http.MethodPatch, p.path, tn.Token, "application/merge-patch+json", p.body)
					if s != 200 {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("PATCH %s %s: %d %s", p.path, p.body, s, b))
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d patches failed, e.g. %s", len(failures), 2*writers*rounds, failures[0])
	}
}

// TestLockedPatchIs503Within5sWhenTheDatabaseFreezes: in its locked last
// round, a PATCH whose UPDATE hit a taken email kept its (aborted)
// transaction open while it asked contact.Duplicate for the holder on
// another connection. When the database froze then, the lookup waited
// out its statement timeout (2 s + the 0.5 s cancel grace), and only then
// did WithTx roll back, on the frozen connection, with a fresh 2 s
// statement timeout of its own (context.WithoutCancel) and the grace
// again: the answer came after 5.5 s. The holder is now looked up once
// the transaction has ended, and a rollback is bounded by the request's
// deadline too. A trigger makes the two
// optimistic rounds lose (as concurrent writers would); a queued table
// lock holds the lookup until the freeze, so that the freeze falls in the
// window between the UPDATE and the rollback.
func TestLockedPatchIs503Within5sWhenTheDatabaseFreezes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := dbtest.NewCluster(t)
	d, err := db.Open(ctx, c.URL) // production bounds
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	h := servertest.New(t, servertest.Options{DB: d, Config: func(cfg *server.Config) { cfg.RequestTimeout = server.DefaultRequestTimeout }})
	tn := h.NewFastTenant("Frozen Patch Co")
	h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"taken@x.co"}`)
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"busy@x.co"}`)
	busy := servertest.ID(t, b)

	raw, err := pgxpool.New(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	if _, err := raw.Exec(ctx, `
		CREATE TABLE review_calls (n int NOT NULL);
		INSERT INTO review_calls VALUES (0);
		CREATE FUNCTION review_lose_twice() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE k int;
		BEGIN
			UPDATE review_calls SET n = n + 1 RETURNING n INTO k;
			IF k <= 2 THEN RETURN NULL; END IF; -- "changed since read": the optimistic rounds lose
			PERFORM pg_sleep(0.3);
			RETURN NEW;
		END $$;
		CREATE TRIGGER review_lose BEFORE UPDATE ON contacts FOR EACH ROW EXECUTE FUNCTION review_lose_twice();`); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		status int
		body   []byte
		took   time.Duration
	}
	res := make(chan answer, 1)
	go func() {
		start := time.Now()
		s, _, b := h.Do(http.MethodPatch, "/api/v1/contacts/"+busy, tn.Token, "application/merge-patch+json", `{"email":"taken@x.co"}`)
		res <- answer{s, b, time.Since(start)}
	}()
	waitFor := func(cond string) {
		t.Helper()
		dbtest.Eventually(t, 3*time.Second, cond, func() bool {
			var n int
			if err := raw.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND `+cond).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		})
	}
	waitFor(`wait_event = 'PgSleep'`) // the locked round's UPDATE
	lockTx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lockTx.Rollback(context.Background()) }()
	locked := make(chan error, 1)
	go func() { _, err := lockTx.Exec(ctx, "LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE"); locked <- err }()
	if err := <-locked; err != nil { // granted once the UPDATE failed (its locks go at the error)
		t.Fatal(err)
	}
	waitFor(`wait_event_type = 'Lock' AND query LIKE '%ContactConflict%'`) // Duplicate, on a second connection
	c.Freeze()
	a := <-res
	c.Thaw()
	if a.status != http.StatusServiceUnavailable || a.took > 5*time.Second {
		t.Fatalf("PATCH with the database frozen in its locked round: %d after %v, want 503 within 5 s: %s", a.status, a.took.Round(time.Millisecond), a.body)
	}
}
