package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/service/servertest"
)

// TestThroughPgBouncerTransactionMode runs two replicas through Debian's
// PgBouncer 1.18 in transaction mode (which cannot keep prepared
// statements), with LISTEN on the direct URL: concurrent issuance,
// creates, lists and revocation across replicas answer without one error,
// and four migrators started at once on a fresh database apply each
// migration once, and again after a restart apply nothing.
func TestThroughPgBouncerTransactionMode(t *testing.T) {
	t.Parallel()
	c := dbtest.NewCluster(t)
	bouncer := dbtest.PgBouncer(t, c)
	ctx := context.Background()
	replica := func() *servertest.Harness {
		d, err := db.OpenConfig(ctx, db.Config{URL: bouncer, DirectURL: c.URL, MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		return servertest.New(t, servertest.Options{DB: d})
	}
	a, b := replica(), replica()
	tn := a.NewTenant("Bouncer Co")

	// Concurrent issuance on both replicas, then creates and lists.
	const n = 40
	errs := make(chan error, 4*n)
	tokens := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		h := a
		if i%2 == 1 {
			h = b
		}
		wg.Go(func() {
			s, _, body, _ := post(h, "/api/oauth/token", "", "application/x-www-form-urlencoded",
				url.Values{"grant_type": {"client_credentials"}, "client_id": {tn.ClientID}, "client_secret": {tn.ClientSecret}}.Encode())
			if s != 200 {
				errs <- fmt.Errorf("token %d: %d %s", i, s, body)
				return
			}
			var tok struct {
				AccessToken string `json:"access_token"`
			}
			if err := jsonUnmarshal(body, &tok); err != nil {
				errs <- err
				return
			}
			tokens[i] = tok.AccessToken
			s, _, body, _ = post(h, "/api/v1/contacts", tok.AccessToken, "application/json",
				fmt.Sprintf(`{"email":"c%d@bouncer.test","firstName":"C"}`, i), "Idempotency-Key", fmt.Sprintf("k%d", i))
			if s != 201 {
				errs <- fmt.Errorf("create contact %d: %d %s", i, s, body)
			}
			s, _, body, _ = post(h, "/api/v1/leads", tok.AccessToken, "application/json",
				fmt.Sprintf(`{"contact":{"email":"l%d@bouncer.test"},"source":"web_form"}`, i))
			if s != 201 {
				errs <- fmt.Errorf("create lead %d: %d %s", i, s, body)
			}
			for _, path := range []string{"/api/v1/contacts?limit=5", "/api/v1/leads?limit=5&sort=updatedAt", "/api/v1/me"} {
				if s, _, body := h.Do(http.MethodGet, path, tok.AccessToken, "", ""); s != 200 {
					errs <- fmt.Errorf("GET %s: %d %s", path, s, body)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	// A full walk of the contacts.
	seen, cursor := 0, ""
	for {
		s, _, body := a.Do(http.MethodGet, "/api/v1/contacts?limit=7"+cursor, tn.Token, "", "")
		if s != 200 {
			t.Fatalf("list: %d %s", s, body)
		}
		var p struct {
			Contacts   []struct{} `json:"contacts"`
			Pagination struct {
				NextCursor string `json:"nextCursor"`
			} `json:"pagination"`
		}
		mustUnmarshal(t, body, &p)
		seen += len(p.Contacts)
		if p.Pagination.NextCursor == "" {
			break
		}
		cursor = "&cursor=" + url.QueryEscape(p.Pagination.NextCursor)
	}
	if seen != 2*n { // the contacts and the leads' inline contacts
		t.Fatalf("walked %d contacts, want %d", seen, 2*n)
	}

	// Revocation on A holds on B at once.
	tok := tokens[1]
	for range 2 {
		if s, _, _ := b.Do(http.MethodGet, "/api/v1/me", tok, "", ""); s != 200 {
			t.Fatalf("warm B: %d", s)
		}
	}
	if s, _, body := a.Do(http.MethodPost, "/api/oauth/revoke", "", "application/x-www-form-urlencoded",
		url.Values{"token": {tok}, "client_id": {tn.ClientID}, "client_secret": {tn.ClientSecret}}.Encode()); s != 200 {
		t.Fatalf("revoke on A: %d %s", s, body)
	}
	if s, _, _ := b.Do(http.MethodGet, "/api/v1/me", tok, "", ""); s != 401 {
		t.Fatalf("revoked token on B: %d, want 401", s)
	}

	// Four migrators at once on a fresh database, then a restart.
	super := c.Super(t)
	if _, err := super.Exec(ctx, "CREATE DATABASE fresh OWNER "+dbtest.Role); err != nil {
		t.Fatal(err)
	}
	migrate := func() (int, error) {
		d, err := db.OpenConfig(ctx, db.Config{URL: dbtest.WithDatabase(bouncer, "fresh"), DirectURL: dbtest.WithDatabase(c.URL, "fresh")})
		if err != nil {
			return 0, err
		}
		defer d.Close()
		return db.Migrate(ctx, d)
	}
	applied := make([]int, 4)
	merrs := make([]error, 4)
	for i := range applied {
		wg.Go(func() { applied[i], merrs[i] = migrate() })
	}
	wg.Wait()
	total := 0
	for i := range applied {
		if merrs[i] != nil {
			t.Fatalf("migrator %d: %v", i, merrs[i])
		}
		total += applied[i]
	}
	var versions, distinct int
	fresh := dbtest.WithDatabase(c.SuperuserURL(), "fresh")
	if err := rawQueryRow(ctx, fresh, "SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0", &versions, &distinct); err != nil {
		t.Fatal(err)
	}
	if total != versions || versions != distinct || versions == 0 {
		t.Fatalf("4 migrators applied %d migrations; %d recorded, %d distinct", total, versions, distinct)
	}
	if n, err := migrate(); err != nil || n != 0 {
		t.Fatalf("migrating again after a restart: %d, %v; want 0 applied", n, err)
	}
}
