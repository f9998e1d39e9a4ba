package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// TestAServerThatCannotLoadItsFilesIsLoggedSo: a real SQLSTATE 58P01
// ("could not access file", as after PostgreSQL's package was upgraded
// in place under the running server; here a trigger loads a library
// that is not there) answers a 503 and logs the request's
// failure as what it is: the upgrade in place and the restart it needs,
// with PostgreSQL's own message (issue 24, item 11). Before, it was a
// generic 503 whose log said only "the database is unavailable".
func TestAServerThatCannotLoadItsFilesIsLoggedSo(t *testing.T) {
	t.Parallel()
	admin := dbtest.AdminURL(t)
	if admin == "" {
		t.Skip("needs a superuser of the test cluster (not with TEST_DATABASE_URL)")
	}
	u := dbtest.URL(t)
	d, err := db.OpenConfig(context.Background(), db.Config{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	var logs syncBuffer
	h := servertest.New(t, servertest.Options{DB: d, Config: func(c *server.Config) {
		c.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	}})
	tn := h.NewTenant("Upgraded Co")

	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	super, err := pgx.Connect(ctx, dbtest.WithDatabase(admin, strings.TrimPrefix(parsed.Path, "/")))
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close(ctx)
	for _, stmt := range []string{
		// A library loaded at run time that is not there, as after the
		// package replaced the server's files: 58P01.
		`CREATE FUNCTION gone_after_upgrade() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			EXECUTE 'LOAD ''$libdir/plugins/partnerapi_gone_after_upgrade''';
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER gone_after_upgrade BEFORE INSERT ON contacts FOR EACH ROW EXECUTE FUNCTION gone_after_upgrade()`,
	} {
		if _, err := super.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	s, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"ada@example.com"}`)
	p := servertest.Decode(t, b)
	if s != http.StatusServiceUnavailable || p["code"] != "unavailable" || hdr.Get("Retry-After") == "" {
		t.Fatalf("create with a missing server library: %d %v %s; want 503 unavailable", s, hdr, b)
	}
	if strings.Contains(string(b), "upgraded") || strings.Contains(string(b), "partnerapi_gone") {
		t.Errorf("the answer shows the operator's diagnosis to the caller: %s", b)
	}

	var failed []string
	for _, line := range strings.Split(logs.String(), "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) != nil || entry["msg"] != "request failed" {
			continue
		}
		failed = append(failed, line)
		e, _ := entry["err"].(string)
		if entry["level"] != "ERROR" || !strings.Contains(e, "SQLSTATE 58P01") || !strings.Contains(e, "upgraded") ||
			!strings.Contains(e, "restart PostgreSQL") || !strings.Contains(e, "partnerapi_gone_after_upgrade") {
			t.Errorf("the failure is logged as %s; want the 58P01 diagnosis, the restart and PostgreSQL's message", line)
		}
	}
	if len(failed) != 1 {
		t.Errorf("%d request failed lines, want 1:\n%s", len(failed), logs.String())
	}
}
