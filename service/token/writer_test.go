package token

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.MainLeakChecked(m)) }

// TestWriterStopsWithoutLosingAnInsert races Inserts against the end of
// Run: every Insert returns, each one that returned nil is stored, and Run
// returns only once its workers are gone (goleak checks the rest).
func TestWriterStopsWithoutLosingAnInsert(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	raw := dbtest.Raw(t, d)
	ws, client := uuid.New(), uuid.New()
	for round := range 20 {
		w := &Writer{DB: d, MaxBatch: 8}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { _ = w.Run(ctx); close(ran) }()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var stored [][]byte
		var failed []error
		for i := range 40 {
			if i == 20+round%20 {
				cancel()
			}
			wg.Go(func() {
				hash := make([]byte, 32)
				_, _ = rand.Read(hash)
				now := time.Now()
				err := w.Insert(context.Background(), dbsqlc.AccessTokenCreateParams{TokenHash: hash, WorkspaceID: ws, ClientID: client,
					Scopes: []string{"contacts:read"}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, err)
					return
				}
				stored = append(stored, hash)
			})
		}
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("an Insert did not return after Run stopped")
		}
		<-ran
		if len(failed) > 0 {
			t.Fatalf("round %d: %d inserts failed: %v", round, len(failed), failed[0])
		}
		var n int
		if err := raw.QueryRow(context.Background(), "SELECT count(*) FROM access_tokens WHERE token_hash = ANY($1)", stored).Scan(&n); err != nil || n != len(stored) {
			t.Fatalf("round %d: %d of %d acknowledged tokens stored (%v)", round, n, len(stored), err)
		}
	}
}

// TestWriterTimeoutIsUnavailable: a batch that cannot be written in time
// (the table is locked) fails with db.ErrUnavailable, which the token
// endpoint answers 503 temporarily_unavailable, not 504.
func TestWriterTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.URL(t)
	d, err := db.Open(ctx, u) // the production bounds
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	raw, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE access_tokens IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	w := &Writer{DB: d}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { _ = w.Run(rctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	start := time.Now()
	now := time.Now()
	err = w.Insert(ctx, dbsqlc.AccessTokenCreateParams{TokenHash: make([]byte, 32), WorkspaceID: uuid.New(), ClientID: uuid.New(),
		Scopes: []string{"contacts:read"}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
	if !errors.Is(err, db.ErrUnavailable) {
		t.Fatalf("insert behind a lock: %v, want db.ErrUnavailable", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("insert behind a lock took %v", took)
	}
}
