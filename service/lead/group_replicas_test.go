package lead

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestTwoReplicasShareKeys: two Writers on one database (two replicas),
// keys shared across them and across two workspaces, two bodies per key.
// Every success under a key answers the one lead stored under it, whose
// body is the success's; the other body only ever gets 409 or 422.
func TestTwoReplicasShareKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := groupDB(t)
	other := uuid.New()
	if _, err := db.Q.WorkspaceCreate(ctx, d.Conn(), dbsqlc.WorkspaceCreateParams{ID: other, Name: "other"}); err != nil {
		t.Fatal(err)
	}
	ws := []*Writer{{DB: d, MaxGroup: 8}, {DB: d, MaxGroup: 8}}
	rctx, cancel := context.WithCancel(ctx)
	var ran sync.WaitGroup
	for _, w := range ws {
		ran.Go(func() { _ = w.Run(rctx) })
	}
	defer func() { cancel(); ran.Wait() }()
	type ack struct {
		space uuid.UUID
		key   string
		body  byte
		id    uuid.UUID
	}
	var mu sync.Mutex
	var acks []ack
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for i := range 30 {
				n := g*1000 + i
				it := groupItem(n)
				space := groupWorkspace
				if n%2 == 1 {
					space = other
				}
				it.WorkspaceID = space
				k := (n / 2) % 4
				body := byte(n % 3 / 2) // two bodies, unequal shares
				it.ContactEmail = ptr(fmt.Sprintf("k%d-%d@example.com", k, body))
				it = withKey(it, fmt.Sprintf("key-%d", k), body)
				// As idempotency.lockKey: one lock per workspace and key,
				// whatever the body (withKey's depends on the body).
				it.LockKey = ptr(int64(space[0])<<8 | int64(k))
				for {
					row, err := ws[g%2].Create(ctx, it)
					if errors.Is(err, db.ErrKeyInFlight) || errors.Is(err, db.ErrKeyReused) {
						break
					}
					if err != nil {
						t.Errorf("create %d: %v", n, err)
						return
					}
					if row.WorkspaceID != space {
						t.Errorf("create %d in %v answered a lead of workspace %v", n, space, row.WorkspaceID)
					}
					mu.Lock()
					acks = append(acks, ack{space, *it.Key, body, row.ID})
					mu.Unlock()
					break
				}
			}
		})
	}
	wg.Wait()
	raw := dbtest.Raw(t, d)
	type sk struct {
		space uuid.UUID
		key   string
	}
	first := map[sk]ack{}
	for _, a := range acks {
		if f, ok := first[sk{a.space, a.key}]; ok && (f.id != a.id || f.body != a.body) {
			t.Fatalf("key %s in %v answered %v (body %d) and %v (body %d)", a.key, a.space, f.id, f.body, a.id, a.body)
		}
		first[sk{a.space, a.key}] = a
		var space uuid.UUID
		var email string
		if err := raw.QueryRow(ctx, "SELECT l.workspace_id, c.email FROM leads l JOIN contacts c ON c.workspace_id = l.workspace_id AND c.id = l.contact_id WHERE l.id = $1", a.id).Scan(&space, &email); err != nil {
			t.Fatalf("acknowledged lead %v: %v", a.id, err)
		}
		if space != a.space || email[len(email)-13] != '0'+a.body {
			t.Fatalf("lead %v: workspace %v email %s, want %v body %d", a.id, space, email, a.space, a.body)
		}
	}
	var leads int
	if err := raw.QueryRow(ctx, "SELECT count(*) FROM leads l JOIN contacts c ON c.workspace_id = l.workspace_id AND c.id = l.contact_id WHERE c.email LIKE 'k%'").Scan(&leads); err != nil || leads != len(first) {
		t.Fatalf("%d leads under keys, %d keys answered (%v)", leads, len(first), err)
	}
	t.Logf("%d acks over %d keys", len(acks), len(first))
}
