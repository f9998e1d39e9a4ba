package lead

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestLeadWriterStopsWithoutLosingACreate races Creates against the end of
// Run: every Create returns, and each one that returned nil is stored.
func TestLeadWriterStopsWithoutLosingACreate(t *testing.T) {
	t.Parallel()
	d := groupDB(t)
	raw := dbtest.Raw(t, d)
	for round := range 10 {
		w := &Writer{DB: d, MaxGroup: 8}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { _ = w.Run(ctx); close(ran) }()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var stored []uuid.UUID
		var failed []error
		for i := range 40 {
			if i == 20+round {
				cancel()
			}
			wg.Go(func() {
				it := groupItem(round*100 + i)
				it.ID = uuid.New()
				if i%2 == 0 {
					it.ContactID = ptr(groupContact)
				} else {
					it.ContactNewID, it.ContactEmail = uuid.New(), ptr("shared@example.com")
				}
				var row dbsqlc.Lead
				var err error
				for range 3 {
					if row, err = w.Create(context.Background(), it); err == nil {
						break
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, err)
					return
				}
				stored = append(stored, row.ID)
			})
		}
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a Create did not return after Run stopped")
		}
		<-ran
		if len(failed) > 0 {
			t.Fatalf("round %d: %d creates failed: %v", round, len(failed), failed[0])
		}
		var n int
		if err := raw.QueryRow(context.Background(), "SELECT count(*) FROM leads WHERE id = ANY($1)", stored).Scan(&n); err != nil || n != len(stored) {
			t.Fatalf("round %d: %d of %d acknowledged leads stored (%v)", round, n, len(stored), err)
		}
	}
}
