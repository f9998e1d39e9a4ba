package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestTenantShareBoundsConnections: a workspace's requests hold at most
// its share of the pool; one more waits without a connection and is then
// refused with ErrBusy, while another workspace gets a connection at
// once, and a request's own second connection never waits for the slot
// it holds itself.
func TestTenantShareBoundsConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := db.OpenConfig(ctx, db.Config{URL: dbtest.URL(t), MaxConns: 4, AcquireTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, b := uuid.New(), uuid.New()
	busy := func(ctx context.Context) (release func()) {
		held, done := make(chan struct{}), make(chan struct{})
		go func() {
			_ = d.WithTx(ctx, func(tx db.DBTX) error {
				close(held)
				<-done
				return nil
			})
		}()
		<-held
		return func() { close(done) }
	}
	// Two requests of workspace a (its share: half of 4) hold a
	// connection each.
	r1 := busy(db.WithTenant(ctx, a, uuid.New()))
	r2 := busy(db.WithTenant(ctx, a, uuid.New()))
	third := db.WithTenant(ctx, a, uuid.New())
	start := time.Now()
	if err := d.Ping(third); !errors.Is(err, db.ErrBusy) {
		t.Fatalf("a third request of the workspace: %v, want ErrBusy", err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("refused after %v, want a wait of the acquire timeout first", waited)
	}
	if err := d.Ping(db.WithTenant(ctx, b, uuid.New())); err != nil {
		t.Fatalf("another workspace: %v", err)
	}
	// A request that holds a connection of its share may take a second.
	nested := db.WithTenant(ctx, b, uuid.New())
	if err := d.WithTx(nested, func(db.DBTX) error { return d.Ping(nested) }); err != nil {
		t.Fatalf("a request's own second connection: %v", err)
	}
	// When one of a's requests ends, the next one of a is served.
	waiting := make(chan error, 1)
	go func() { waiting <- d.Ping(db.WithTenant(ctx, a, uuid.New())) }()
	r1()
	if err := <-waiting; err != nil {
		t.Fatalf("a request of a once a slot came free: %v", err)
	}
	r2()
}
