package auth

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/security/scope"
	"github.com/svat/partnerapi/internal/security/secret"
)

// TestDBStoreKeepsKnownScopesOfAStoredSet: a stored scope this binary
// does not know (a newer replica wrote it during a rollout) is not
// granted and is logged, and the token and client keep their known
// scopes instead of losing all of them.
func TestDBStoreKeepsKnownScopesOfAStoredSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	var logs bytes.Buffer
	store := DBStore{DB: d, Log: slog.New(slog.NewJSONHandler(&logs, nil))}

	ws, member, client := uuid.New(), uuid.New(), uuid.New()
	_, th := secret.NewToken()
	stored := []string{"contacts:read", "invoices:read", "leads:write"}
	err := d.WithTx(ctx, func(tx db.DBTX) error {
		if _, err := db.Q.WorkspaceCreate(ctx, tx, dbsqlc.WorkspaceCreateParams{ID: ws, Name: "Rollout Co"}); err != nil {
			return err
		}
		if _, err := db.Q.MemberCreate(ctx, tx, dbsqlc.MemberCreateParams{WorkspaceID: ws, ID: member, Email: "m@rollout.test", Approved: true, SettingsAccess: true}); err != nil {
			return err
		}
		_, hash := secret.NewClientSecret()
		c, err := db.Q.APIClientCreate(ctx, tx, dbsqlc.APIClientCreateParams{WorkspaceID: ws, ID: client, Name: "c",
			SecretHash: hash[:], Scopes: stored, RedirectUris: []string{}, CreatedBy: member})
		if err != nil {
			return err
		}
		return db.Q.AccessTokenCreate(ctx, tx, dbsqlc.AccessTokenCreateParams{TokenHash: th[:], WorkspaceID: ws, ClientID: client,
			Scopes: stored, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), SecretGeneration: c.SecretGeneration})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := scope.Set(0)
	for _, n := range []string{"contacts:read", "leads:write"} {
		s, _ := scope.Lookup(n)
		want |= s
	}
	c, err := store.LookupClient(ctx, client)
	if err != nil || c.Scopes != want {
		t.Fatalf("client scopes = %v (%v), want %v", c.Scopes.Names(), err, want.Names())
	}
	rec, err := store.LookupToken(ctx, th)
	if err != nil || rec.Scopes != want {
		t.Fatalf("token scopes = %v (%v), want %v", rec.Scopes.Names(), err, want.Names())
	}
	if !strings.Contains(logs.String(), "invoices:read") {
		t.Fatalf("the unknown stored scope was not logged: %s", logs.String())
	}
}
