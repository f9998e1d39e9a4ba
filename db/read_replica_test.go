package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
)

// readCluster is a primary, its streaming standby, and a DB whose reads
// may go to the standby (waiting up to wait for it).
func readCluster(t *testing.T, wait time.Duration) (*dbtest.Cluster, *dbtest.Standby, *db.DB) {
	t.Helper()
	primary := dbtest.NewCluster(t)
	standby := dbtest.NewStandby(t, primary)
	d, err := db.OpenConfig(context.Background(), db.Config{URL: primary.URL, ReadURL: standby.URL, ReadWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return primary, standby, d
}

// onStandby reads, through a Reader, whether the server it reaches is in
// recovery and whether it holds workspace ws.
func onStandby(t *testing.T, d *db.DB, ws uuid.UUID) (reader db.Reader, inRecovery, found bool) {
	t.Helper()
	ctx := context.Background()
	rd, err := d.Reader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if err := rd.Conn().QueryRow(ctx, `SELECT pg_is_in_recovery(), EXISTS (SELECT FROM workspaces WHERE id = $1)`, ws).
		Scan(&inRecovery, &found); err != nil {
		t.Fatal(err)
	}
	return rd, inRecovery, found
}

func newWorkspace(t *testing.T, d *db.DB) uuid.UUID {
	t.Helper()
	ws := uuid.New()
	if _, err := d.Conn().Exec(context.Background(), `INSERT INTO workspaces (id, name) VALUES ($1, 'Reads')`, ws); err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestAReadGoesToAStandbyThatHasReplayedTheWrite: a write acknowledged by
// the primary, then a read: the Reader's statements run on the standby
// (the server they reach is in recovery, which the primary is not, so the
// test fails if reads silently stay on the primary) and see the write.
func TestAReadGoesToAStandbyThatHasReplayedTheWrite(t *testing.T) {
	t.Parallel()
	_, _, d := readCluster(t, time.Minute) // a slow machine still replays in time
	ws := newWorkspace(t, d)
	rd, inRecovery, found := onStandby(t, d, ws)
	if !rd.Standby() || !inRecovery || !found {
		t.Fatalf("Reader.Standby %v, in recovery %v, write seen %v; want all true", rd.Standby(), inRecovery, found)
	}
	if s, p := d.ReadStat(); s != 1 || p != 0 {
		t.Errorf("ReadStat = %d on the standby, %d on the primary; want 1, 0", s, p)
	}
}

// TestAReadAfterAWriteALaggingStandbyLacksGoesToThePrimary: with the
// standby's replay paused, a write the standby lacks makes the next read
// go to the primary after the bounded wait, and see it; once replay
// resumes, reads go to the standby again.
func TestAReadAfterAWriteALaggingStandbyLacksGoesToThePrimary(t *testing.T) {
	t.Parallel()
	const wait = 50 * time.Millisecond
	primary, standby, d := readCluster(t, wait)
	standby.CatchUp(t, primary)
	ctx := context.Background()
	super := standby.Super(t)
	if _, err := super.Exec(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t, d)
	start := time.Now()
	rd, inRecovery, found := onStandby(t, d, ws)
	took := time.Since(start)
	if rd.Standby() || inRecovery || !found {
		t.Fatalf("Reader.Standby %v, in recovery %v, write seen %v; want the primary, with the write", rd.Standby(), inRecovery, found)
	}
	if took < wait || took > wait+5*time.Second {
		t.Errorf("the read took %v; want the bounded wait (%v), and not much more", took, wait)
	}
	if s, p := d.ReadStat(); s != 0 || p != 1 {
		t.Errorf("ReadStat = %d on the standby, %d on the primary; want 0, 1", s, p)
	}
	if _, err := super.Exec(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	dbtest.Eventually(t, time.Minute, "reads to go to the resumed standby", func() bool {
		rd, inRecovery, found := onStandby(t, d, ws)
		return rd.Standby() && inRecovery && found
	})
}

// TestAStandbyStampsAndJudgesCursors: on a standby the history functions
// of the sync and events pages (migrations 00108, 00110, 00114) answer as
// on the primary: the timeline and a position for the cursors a page
// makes, and a cursor check that serves a cursor of the same history
// (before, NULL and NULL: a standby's cursors carried no history).
func TestAStandbyStampsAndJudgesCursors(t *testing.T) {
	t.Parallel()
	primary, standby, d := readCluster(t, time.Minute)
	standby.CatchUp(t, primary)
	ctx := context.Background()
	now, err := db.Q.HistoryNow(ctx, d.Conn())
	if err != nil {
		t.Fatal(err)
	}
	rd, err := d.Reader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if !rd.Standby() {
		t.Fatal("the read did not go to the caught-up standby")
	}
	var timeline int32
	var position int64
	var ok bool
	if err := rd.Conn().QueryRow(ctx, `SELECT partner_history_timeline(), partner_history_position(),
		partner_history_check($1, $2, $3)`, now.NextXid-1, now.Timeline, now.Position).Scan(&timeline, &position, &ok); err != nil {
		t.Fatal(err)
	}
	if timeline != now.Timeline || position < now.Position || !ok {
		t.Errorf("on the standby: timeline %d, position %d, check %v; want timeline %d, position at least %d, true",
			timeline, position, ok, now.Timeline, now.Position)
	}
}

// TestWithoutAReadPoolReadsUseThePool: unset, the Reader is the pool's
// own connections, at no cost (no allocation, no statement).
func TestWithoutAReadPoolReadsUseThePool(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	if d.HasReadPool() {
		t.Fatal("a read pool without ReadURL")
	}
	allocs := testing.AllocsPerRun(100, func() {
		rd, err := d.Reader(ctx)
		if err != nil || rd.Standby() {
			t.Fatalf("Reader: %v, standby %v", err, rd.Standby())
		}
		rd.Close()
	})
	if allocs != 0 {
		t.Errorf("Reader allocates %v times without a read pool; want 0", allocs)
	}
	rd, err := d.Reader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var one int
	if err := rd.Conn().QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil || one != 1 {
		t.Fatalf("a read on the pool: %d %v", one, err)
	}
	if s, p := d.ReadStat(); s != 0 || p != 0 {
		t.Errorf("ReadStat = %d, %d without a read pool; want 0, 0", s, p)
	}
}

// TestReadsOnAStandbyKeepTheTenantSharesApart: each pool bounds a
// tenant's connections with its own count. A request that takes a
// standby connection, then a primary one, and gives the standby's back
// first leaves both pools' shares as they were: the tenant's next
// request is served by the standby again (with one count across both
// pools, the standby's slot was never given back, and the share of 1
// was spent for good).
func TestReadsOnAStandbyKeepTheTenantSharesApart(t *testing.T) {
	t.Parallel()
	primary := dbtest.NewCluster(t)
	standby := dbtest.NewStandby(t, primary)
	ctx := context.Background()
	d, err := db.OpenConfig(ctx, db.Config{URL: primary.URL, ReadURL: standby.URL, ReadWait: time.Minute, TenantShare: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	ws, client := uuid.New(), uuid.New()
	for range 3 {
		req := db.WithTenant(ctx, ws, client)
		rd, err := d.Reader(req)
		if err != nil {
			t.Fatal(err)
		}
		if !rd.Standby() {
			t.Fatal("a read of the tenant did not go to the standby: its share there is spent")
		}
		rows, err := d.Conn().Query(req, `SELECT 1`)
		if err != nil {
			t.Fatal(err)
		}
		rd.Close()
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
}
