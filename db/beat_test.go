package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestAPrimaryCutOffFromItsStandbysServesNothing: a primary with
// synchronous replication that its standbys no longer confirm (a
// partition) still answers reads, while the standby promoted in its place
// may acknowledge writes it never sees (make test-ha, partition: a read
// missed a create acknowledged before it). Once its last confirmed beat is
// a lease old, the pool's connections to it serve nothing (ErrUnavailable,
// a 503, within a statement's time), a new connection to it is refused,
// and both serve again once a standby confirms commits.
func TestAPrimaryCutOffFromItsStandbysServesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := dbtest.NewCluster(t)
	super := c.Super(t)
	dbtest.NewStandby(t, c)
	standbys := func(names string) {
		t.Helper()
		if _, err := super.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '"+names+"'"); err != nil {
			t.Fatal(err)
		}
		if _, err := super.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
		dbtest.Eventually(t, 5*time.Second, "synchronous_standby_names reloaded", func() bool {
			var v string
			return super.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&v) == nil && v == names
		})
	}
	beatAt := func() time.Time {
		t.Helper()
		var at time.Time
		if err := super.QueryRow(ctx, "SELECT at FROM partner_primary_beat").Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	standbys("*")

	const lease, statement = 400 * time.Millisecond, 500 * time.Millisecond
	cfg := db.Config{URL: c.URL, PrimaryLease: lease, StatementTimeout: statement, TenantShare: -1}
	d, err := db.OpenConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	id := uuid.New()
	if _, err := db.Q.WorkspaceCreate(ctx, d.Conn(), dbsqlc.WorkspaceCreateParams{ID: id, Name: "cut off"}); err != nil {
		t.Fatal(err)
	}
	before := beatAt()
	time.Sleep(lease) // real time: the lease runs on the wall clock
	if _, err := db.Q.WorkspaceGet(ctx, d.Conn(), id); err != nil {
		t.Fatalf("read with a standby confirming commits: %v", err)
	}
	if !beatAt().After(before) {
		t.Fatal("no beat committed once the lease had passed")
	}
	// Many requests at once when the lease has passed: one beat, the
	// others wait for it; none is refused by a healthy primary.
	time.Sleep(lease) // real time: the lease runs on the wall clock
	errs := make(chan error, 32)
	for range 32 {
		go func() {
			_, err := db.Q.WorkspaceGet(ctx, d.Conn(), id)
			errs <- err
		}()
	}
	for range 32 {
		if err := <-errs; err != nil {
			t.Fatalf("read on a healthy primary as its lease ran out: %v", err)
		}
	}

	// The partition: commits wait for a standby that never answers.
	standbys("ghost")
	time.Sleep(lease) // real time: the lease runs on the wall clock
	start := time.Now()
	_, err = db.Q.WorkspaceGet(ctx, d.Conn(), id)
	if !errors.Is(err, db.ErrUnavailable) {
		t.Fatalf("read on a primary cut off from its standbys: err = %v, want ErrUnavailable (its data may miss writes a new primary acknowledged)", err)
	}
	if took := time.Since(start); took > 2*statement {
		t.Errorf("the refusal took %v, want about a statement's time (the beat's)", took)
	}
	fresh, err := db.OpenConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := db.Q.WorkspaceGet(ctx, fresh.Conn(), id); !errors.Is(err, db.ErrUnavailable) {
		t.Fatalf("read on a new connection to the cut-off primary: err = %v, want ErrUnavailable", err)
	}

	// Healed: both pools serve again.
	standbys("*")
	for _, p := range []*db.DB{d, fresh} {
		dbtest.Eventually(t, 10*time.Second, "reads served again", func() bool {
			_, err := db.Q.WorkspaceGet(ctx, p.Conn(), id)
			return err == nil
		})
	}
}

// TestNoBeatsWithoutSynchronousReplication: a server without synchronous
// replication (one server alone: every benchmark) is never beaten on: its
// reads pay nothing for the lease.
func TestNoBeatsWithoutSynchronousReplication(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := dbtest.NewCluster(t)
	super := c.Super(t)
	var before time.Time
	if err := super.QueryRow(ctx, "SELECT at FROM partner_primary_beat").Scan(&before); err != nil {
		t.Fatal(err)
	}
	const lease = 100 * time.Millisecond
	d, err := db.OpenConfig(ctx, db.Config{URL: c.URL, PrimaryLease: lease, TenantShare: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for range 5 {
		if _, err := db.Q.WorkspaceList(ctx, d.Conn(), dbsqlc.WorkspaceListParams{MaxRows: 1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease) // real time: the lease runs on the wall clock
	}
	var after time.Time
	if err := super.QueryRow(ctx, "SELECT at FROM partner_primary_beat").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if !after.Equal(before) {
		t.Fatalf("a beat was written (%v, was %v) on a server without synchronous replication", after, before)
	}
}
