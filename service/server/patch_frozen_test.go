package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

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
	busy := decode(t, b)["id"].(string)

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
		for deadline := time.Now().Add(3 * time.Second); ; {
			var n int
			if err := raw.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND `+cond).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", cond)
			}
			time.Sleep(2 * time.Millisecond)
		}
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
