package auth

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/internal/security/scope"
	"github.com/svat/partnerapi/internal/security/secret"
)

type mapStore map[secret.Hash]Record

func (m mapStore) LookupToken(_ context.Context, h secret.Hash) (Record, error) {
	r, ok := m[h]
	if !ok {
		return Record{}, ErrInvalidToken
	}
	return r, nil
}

// BenchmarkTokenCheck is the per-request token check on a cache hit: the
// checksum, the SHA-256, the cache read and the rules.
func BenchmarkTokenCheck(b *testing.B) {
	tok, hash := secret.NewToken()
	store := mapStore{hash: {Principal: Principal{WorkspaceID: uuid.New(), ClientID: uuid.New(), Scopes: scope.All,
		ExpiresAt: time.Now().Add(time.Hour)}, ClientActive: true}}
	c := &Cache{Store: store}
	c.goLive()
	a := &Authenticator{Store: c}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCacheServesHitsAndDropsOnInvalidation(t *testing.T) {
	tok, hash := secret.NewToken()
	client := uuid.New()
	store := &countStore{m: mapStore{hash: {Principal: Principal{ClientID: client, Scopes: scope.All, ExpiresAt: time.Now().Add(time.Hour)}, ClientActive: true}}}
	c := &Cache{Store: store}
	a := &Authenticator{Store: c}
	ctx := context.Background()
	// Not live: every check goes to the store.
	for range 3 {
		if _, err := a.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if store.n != 3 {
		t.Fatalf("store calls while not live = %d, want 3", store.n)
	}
	c.goLive()
	for range 3 {
		if _, err := a.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if store.n != 4 {
		t.Fatalf("store calls while live = %d, want 4", store.n)
	}
	c.handle("c:" + uuid.NewString())
	_, _ = a.Verify(ctx, tok)
	if store.n != 4 {
		t.Fatal("another client's invalidation dropped the entry")
	}
	c.handle("c:" + client.String())
	_, _ = a.Verify(ctx, tok)
	if store.n != 5 {
		t.Fatal("the client's invalidation did not drop the entry")
	}
	// Bounded size.
	c.MaxEntries = 100
	for range 1000 {
		_, h := secret.NewToken()
		_, _ = c.LookupToken(ctx, h)
	}
	if n := c.Len(); n > 100 {
		t.Fatalf("cache holds %d entries, bound is 100", n)
	}
}

type countStore struct {
	m mapStore
	n int
}

func (s *countStore) LookupToken(ctx context.Context, h secret.Hash) (Record, error) {
	s.n++
	return s.m.LookupToken(ctx, h)
}
