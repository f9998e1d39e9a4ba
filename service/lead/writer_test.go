package lead

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/validate"
)

func TestMain(m *testing.M) { os.Exit(dbtest.MainLeakChecked(m)) }

var (
	groupWorkspace = uuid.MustParse("6f9f0d4e-0000-4000-8000-000000000001")
	groupClient    = uuid.MustParse("6f9f0d4e-0000-4000-8000-000000000002")
	groupContact   = uuid.MustParse("6f9f0d4e-0000-4000-8000-000000000003")
)

// groupDB is a fresh database holding the workspace and one contact of
// the group tests.
func groupDB(t *testing.T) *db.DB {
	t.Helper()
	d := dbtest.New(t)
	ctx := context.Background()
	if _, err := db.Q.WorkspaceCreate(ctx, d.Conn(), dbsqlc.WorkspaceCreateParams{ID: groupWorkspace, Name: "group"}); err != nil {
		t.Fatal(err)
	}
	email := "held@example.com"
	if _, err := createAlone(ctx, d.Conn(), dbsqlc.LeadCreateParams{WorkspaceID: groupWorkspace, ClientID: groupClient,
		Path: Path, ID: uuid.New(), ContactNewID: groupContact, ContactEmail: &email, Status: "new"}); err != nil {
		t.Fatal(err)
	}
	return d
}

func ptr[T any](v T) *T { return &v }

// groupItem is a create of the group tests: fixed ids, so that the same
// item gives the same answer in two databases.
func groupItem(n int) dbsqlc.LeadCreateParams {
	return dbsqlc.LeadCreateParams{WorkspaceID: groupWorkspace, ClientID: groupClient, Path: Path, Status: "new",
		ID:           uuid.MustParse(fmt.Sprintf("00000000-0000-4000-8000-%012d", n)),
		ContactNewID: uuid.MustParse(fmt.Sprintf("00000000-0000-4000-9000-%012d", n))}
}

func withKey(a dbsqlc.LeadCreateParams, key string, hash byte) dbsqlc.LeadCreateParams {
	a.Key, a.RequestHash, a.LockKey = &key, []byte{hash}, ptr(int64(len(key))*1000+int64(hash))
	a.FreshSince = ptr(time.Now().Add(-time.Hour))
	return a
}

// groupItems covers every outcome of a single create: new and found
// inline contacts (also one made by an earlier item of the same group),
// a replayed key, a key reused with another body, a taken external id, an
// unknown contact, defaults and optional fields.
func groupItems() []dbsqlc.LeadCreateParams {
	var items []dbsqlc.LeadCreateParams
	a := groupItem(0)
	a.ContactEmail, a.ContactFirstName = ptr("a@example.com"), ptr("Ada")
	items = append(items, withKey(a, "k1", 1))
	b := groupItem(1)
	b.ContactEmail, b.Title, b.ValueAmount, b.ValueCurrency = ptr("a@example.com"), ptr("T1"), ptr(int64(100)), ptr("USD")
	items = append(items, b)
	replay := a
	replay.ID, replay.ContactNewID = groupItem(2).ID, groupItem(2).ContactNewID
	items = append(items, withKey(replay, "k1", 1))
	items = append(items, withKey(groupItem(3), "k1", 2))
	e1 := groupItem(4)
	e1.ContactID, e1.ExternalID = ptr(groupContact), ptr("E1")
	items = append(items, e1)
	e2 := groupItem(5)
	e2.ContactID, e2.ExternalID, e2.Status = ptr(groupContact), ptr("E1"), "qualified"
	items = append(items, e2)
	unknown := groupItem(6)
	unknown.ContactID = ptr(uuid.MustParse("6f9f0d4e-0000-4000-8000-00000000ffff"))
	items = append(items, unknown)
	phone := groupItem(7)
	phone.ContactPhone, phone.Source, phone.Campaign, phone.Message = ptr("+15550100"), ptr("web"), ptr("spring"), ptr("hi")
	items = append(items, phone)
	named := groupItem(8)
	named.ContactEmail, named.ContactFirstName, named.ContactLastName = ptr("b@example.com"), ptr("Grace"), ptr("Hopper")
	items = append(items, named)
	same := groupItem(9)
	same.ContactID = ptr(groupItem(0).ContactNewID)
	items = append(items, same)
	held := groupItem(10)
	held.ContactEmail = ptr("held@example.com")
	items = append(items, held)
	return items
}

// outcome describes what a create answered, without its timestamps.
func outcome(row dbsqlc.Lead, err error) string {
	var conflict *db.ConflictError
	var api *apierror.Error
	switch {
	case err == nil:
		return fmt.Sprintf("lead %v contact %v title %q status %s source %v campaign %v message %v value %v %v external %v",
			row.ID, row.ContactID, row.Title, row.Status, deref(row.Source), deref(row.Campaign), deref(row.Message),
			deref(row.ValueAmount), deref(row.ValueCurrency), deref(row.ExternalID))
	case errors.As(err, &api) && len(api.Fields) == 1 && api.Fields[0].Code == validate.NotFound:
		return "no such contact"
	case errors.As(err, &api) && api.Code == apierror.CodeDuplicate:
		return "duplicate of " + api.ExistingID
	case errors.As(err, &conflict):
		return "conflict " + conflict.Constraint
	case errors.Is(err, db.ErrKeyInFlight):
		return "key in flight"
	case errors.Is(err, db.ErrKeyReused):
		return "key reused"
	}
	return "error " + err.Error()
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestGroupAnswersAsEachCreateAlone: a group of creates sharing one
// statement gives each item the answer it gets when the items run alone,
// one after another, and leaves the same records.
func TestGroupAnswersAsEachCreateAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	items := groupItems()

	alone := groupDB(t)
	var want []string
	for _, it := range items {
		row, err := createAlone(ctx, alone.Conn(), it)
		want = append(want, outcome(row, err))
	}

	grouped := groupDB(t)
	w := &Writer{DB: grouped}
	got := w.write(ctx, items)
	for i := range items {
		if got[i].alone {
			t.Fatalf("item %d was left to run alone: %v", i, got[i].err)
		}
		if g := outcome(got[i].row, got[i].err); g != want[i] {
			t.Errorf("item %d in a group: %s\nalone: %s", i, g, want[i])
		}
	}
	if want[2] != want[0] || want[3] != "key reused" || !strings.HasPrefix(want[5], "duplicate of lea_") || want[6] != "no such contact" {
		t.Fatalf("the items do not cover the outcomes they are meant to: %q", want)
	}
	for _, q := range []string{
		"SELECT count(*) FROM leads",
		"SELECT count(*) FROM contacts",
		"SELECT count(*) FROM idempotency_keys",
	} {
		var a, g int
		if err := dbtest.Raw(t, alone).QueryRow(ctx, q).Scan(&a); err != nil {
			t.Fatal(err)
		}
		if err := dbtest.Raw(t, grouped).QueryRow(ctx, q).Scan(&g); err != nil {
			t.Fatal(err)
		}
		if a != g {
			t.Errorf("%s: %d alone, %d grouped", q, a, g)
		}
	}
	var xids int
	if err := dbtest.Raw(t, grouped).QueryRow(ctx, "SELECT count(DISTINCT change_xid) FROM leads WHERE id::text LIKE '00000000-%'").Scan(&xids); err != nil || xids != 1 {
		t.Errorf("the group's leads were written by %d transactions (%v), want 1", xids, err)
	}
}

// TestGroupThatFailsRunsEachItemAlone: an item failing with an error the
// group statement does not catch (here a status the table refuses, which
// the API never sends) rolls the group back; each item then runs alone,
// so the others are created and that one alone fails.
func TestGroupThatFailsRunsEachItemAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := groupDB(t)
	a, bad, b := groupItem(0), groupItem(1), groupItem(2)
	a.ContactID, bad.ContactID, b.ContactID = ptr(groupContact), ptr(groupContact), ptr(groupContact)
	bad.Status = "bogus"
	w := &Writer{DB: d}
	items := []dbsqlc.LeadCreateParams{a, bad, b}
	got := w.write(ctx, items)
	for i, c := range got {
		if !c.alone {
			t.Fatalf("item %d of a failed group: %v, want it left to run alone", i, c.err)
		}
		got[i].row, got[i].err = w.settle(ctx, items[i], c)
	}
	if got[0].err != nil || got[0].row.ID != a.ID || got[2].err != nil || got[2].row.ID != b.ID {
		t.Fatalf("the good items: %v %v, %v %v", got[0].row.ID, got[0].err, got[2].row.ID, got[2].err)
	}
	if got[1].err == nil || errors.Is(got[1].err, db.ErrUnavailable) {
		t.Fatalf("the refused item: %v, want the check violation", got[1].err)
	}
	var n int
	if err := dbtest.Raw(t, d).QueryRow(ctx, "SELECT count(*) FROM leads WHERE id = ANY($1)", []uuid.UUID{a.ID, bad.ID, b.ID}).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d leads stored (%v), want 2", n, err)
	}
}

// TestItemWaitingForALockDoesNotHoldUpItsGroup: an item whose inline
// contact's email is being inserted by a transaction that stays open
// would wait for it, and the whole group with it. It waits at most the
// group's lock timeout and is then left to its caller; the rest of the
// group commits at once.
func TestItemWaitingForALockDoesNotHoldUpItsGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := groupDB(t)
	raw := dbtest.Raw(t, d)
	blocker, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(ctx) }()
	if _, err := blocker.Exec(ctx, "INSERT INTO contacts (workspace_id, id, email, created_at, updated_at) VALUES ($1, $2, 'blocked@example.com', now(), now())",
		groupWorkspace, uuid.New()); err != nil {
		t.Fatal(err)
	}
	blocked, free, other := groupItem(0), groupItem(1), groupItem(2)
	blocked.ContactEmail, free.ContactID, other.ContactEmail = ptr("blocked@example.com"), ptr(groupContact), ptr("free@example.com")
	items := []dbsqlc.LeadCreateParams{blocked, free, other}
	w := &Writer{DB: d}
	start := time.Now()
	got := w.write(ctx, items)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the group took %v behind one item's lock", took)
	}
	if !got[0].alone {
		t.Fatalf("the blocked item: %v, want it left to run alone", got[0].err)
	}
	for i := 1; i < 3; i++ {
		if got[i].alone || got[i].err != nil || got[i].row.ID != items[i].ID {
			t.Fatalf("item %d: %+v", i, got[i])
		}
	}
	var n int
	if err := raw.QueryRow(ctx, "SELECT count(*) FROM leads WHERE id = ANY($1)", []uuid.UUID{free.ID, other.ID}).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d of the group's 2 leads committed while the blocker is open (%v)", n, err)
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	row, err := w.settle(ctx, blocked, got[0])
	if err != nil || row.ID != blocked.ID || row.ContactID != blocked.ContactNewID {
		t.Fatalf("the blocked item run alone: %v %v", row.ID, err)
	}
}

// TestConcurrentGroupedCreatesLoseNothing runs creates through a running
// Writer from many goroutines, alongside creates that bypass it (as
// another replica's would), with shared inline emails and shared keys:
// every acknowledged lead is stored, an email has one contact, and a key
// one lead, whose id every acknowledged request with it got.
func TestConcurrentGroupedCreatesLoseNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := groupDB(t)
	w := &Writer{DB: d, MaxGroup: 8}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { _ = w.Run(rctx); close(ran) }()
	defer func() { cancel(); <-ran }()

	type ack struct {
		key string
		id  uuid.UUID
	}
	var mu sync.Mutex
	var acks []ack
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 25 {
				n := g*100 + i
				it := groupItem(n)
				it.ContactEmail = ptr(fmt.Sprintf("c%d@example.com", n%7))
				key := ""
				if n%3 == 0 {
					key = fmt.Sprintf("key-%d", n%5)
					// The body of a key is the same every time: its hash.
					it = withKey(it, key, byte(n%5))
					it.ContactEmail = ptr(fmt.Sprintf("k%d@example.com", n%5))
				}
				for {
					var row dbsqlc.Lead
					var err error
					if g%4 == 0 {
						row, err = createAlone(ctx, d.Conn(), it)
					} else {
						row, err = w.Create(ctx, it)
					}
					if errors.Is(err, db.ErrKeyInFlight) {
						break // refused, nothing acknowledged
					}
					if err != nil {
						t.Errorf("create %d: %v", n, err)
						return
					}
					mu.Lock()
					acks = append(acks, ack{key, row.ID})
					mu.Unlock()
					break
				}
			}
		})
	}
	wg.Wait()
	raw := dbtest.Raw(t, d)
	byKey := map[string]uuid.UUID{}
	for _, a := range acks {
		var n int
		if err := raw.QueryRow(ctx, "SELECT count(*) FROM leads WHERE id = $1", a.id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("acknowledged lead %v: %d stored (%v)", a.id, n, err)
		}
		if a.key == "" {
			continue
		}
		if first, ok := byKey[a.key]; ok && first != a.id {
			t.Fatalf("key %s answered leads %v and %v", a.key, first, a.id)
		}
		byKey[a.key] = a.id
	}
	var dup int
	if err := raw.QueryRow(ctx, "SELECT count(*) FROM (SELECT email FROM contacts GROUP BY email HAVING count(*) > 1) x").Scan(&dup); err != nil || dup != 0 {
		t.Fatalf("%d emails with several contacts (%v)", dup, err)
	}
	var keyed int
	if err := raw.QueryRow(ctx, "SELECT count(*) FROM leads l JOIN contacts c ON c.workspace_id = l.workspace_id AND c.id = l.contact_id WHERE c.email LIKE 'k%@example.com'").Scan(&keyed); err != nil || keyed != len(byKey) {
		t.Fatalf("%d leads made under keys, want one per key (%d) (%v)", keyed, len(byKey), err)
	}
	if len(acks) < 400-134 { // all but some keyed ones, refused while in flight
		t.Fatalf("only %d of 400 creates acknowledged", len(acks))
	}
}
