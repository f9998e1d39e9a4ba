package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/internal/secret"
)

// Channel is the PostgreSQL NOTIFY channel of token invalidations. The
// triggers of migration 00002 send "c:<client id>" and "w:<workspace id>"
// on it; [Cache.Sync] sends "b:<id>" barriers, which every replica answers
// with "a:<id>".
const Channel = "partner_auth"

// Cache is an in-process token cache in front of a [Store]. A repeated
// request needs no database round trip. It stays correct across replicas
// through LISTEN/NOTIFY: every change a token check depends on (revocation,
// rotation, deactivation, activation, revocation of the client, workspace
// rename) notifies every replica, which drops the affected entries. While
// the listener is down the cache is bypassed, and it is emptied whenever
// the listener (re)connects, so a missed notification can never leave a
// stale entry behind.
type Cache struct {
	Store Store
	// Clients is the API client lookup of the token endpoint, cached the
	// same way (optional).
	Clients ClientStore
	// Pool is where Listen opens its connection and Sync sends barriers.
	Pool *pgxpool.Pool
	// MaxEntries bounds memory; default 100,000 (about 25 MB).
	MaxEntries int
	// TTL bounds the age of any entry, as a backstop; default 5 minutes.
	TTL time.Duration
	// UnknownTTL is how long an unknown token hash is remembered, so garbage
	// tokens with valid checksums cannot hammer the database; default 1
	// minute.
	UnknownTTL time.Duration
	Log        *slog.Logger

	mu      sync.RWMutex
	entries map[secret.Hash]cacheEntry
	clients map[uuid.UUID]clientEntry
	// gen changes on every invalidation; a lookup that raced with one does
	// not store its (possibly stale) result.
	gen  atomic.Uint64
	live atomic.Bool

	barrierMu sync.Mutex
	barriers  map[string]*barrier
}

// barrier waits for acknowledgements from every listening replica.
type barrier struct {
	need, got int
	done      chan struct{}
}

type clientEntry struct {
	c       Client
	unknown bool
	expires time.Time
}

type cacheEntry struct {
	rec     Record
	unknown bool
	expires time.Time
}

func (c *Cache) maxEntries() int {
	if c.MaxEntries > 0 {
		return c.MaxEntries
	}
	return 100_000
}

func (c *Cache) ttl(unknown bool) time.Duration {
	if unknown {
		if c.UnknownTTL > 0 {
			return c.UnknownTTL
		}
		return time.Minute
	}
	if c.TTL > 0 {
		return c.TTL
	}
	return 5 * time.Minute
}

// LookupToken implements [Store].
func (c *Cache) LookupToken(ctx context.Context, hash secret.Hash) (Record, error) {
	if !c.live.Load() {
		return c.Store.LookupToken(ctx, hash)
	}
	now := time.Now()
	c.mu.RLock()
	e, ok := c.entries[hash]
	c.mu.RUnlock()
	if ok && now.Before(e.expires) {
		if e.unknown {
			return Record{}, ErrInvalidToken
		}
		return e.rec, nil
	}
	gen := c.gen.Load()
	rec, err := c.Store.LookupToken(ctx, hash)
	unknown := errors.Is(err, ErrInvalidToken)
	if err != nil && !unknown {
		return rec, err
	}
	c.mu.Lock()
	if c.gen.Load() == gen && c.live.Load() {
		if len(c.entries) >= c.maxEntries() {
			c.evictLocked(now)
		}
		c.entries[hash] = cacheEntry{rec: rec, unknown: unknown, expires: now.Add(c.ttl(unknown))}
	}
	c.mu.Unlock()
	return rec, err
}

// LookupClient implements [ClientStore].
func (c *Cache) LookupClient(ctx context.Context, id uuid.UUID) (Client, error) {
	if !c.live.Load() {
		return c.Clients.LookupClient(ctx, id)
	}
	now := time.Now()
	c.mu.RLock()
	e, ok := c.clients[id]
	c.mu.RUnlock()
	if ok && now.Before(e.expires) {
		if e.unknown {
			return Client{}, ErrUnknownClient
		}
		return e.c, nil
	}
	gen := c.gen.Load()
	cl, err := c.Clients.LookupClient(ctx, id)
	unknown := errors.Is(err, ErrUnknownClient)
	if err != nil && !unknown {
		return cl, err
	}
	c.mu.Lock()
	if c.gen.Load() == gen && c.live.Load() {
		if len(c.clients) >= c.maxEntries() {
			clear(c.clients)
		}
		c.clients[id] = clientEntry{c: cl, unknown: unknown, expires: now.Add(c.ttl(unknown))}
	}
	c.mu.Unlock()
	return cl, err
}

// evictLocked drops expired entries, then about a tenth of the rest (Go's
// map order is random, so this is random eviction).
func (c *Cache) evictLocked(now time.Time) {
	for h, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, h)
		}
	}
	drop := c.maxEntries() / 10
	for h := range c.entries {
		if len(c.entries) < c.maxEntries()-drop {
			break
		}
		delete(c.entries, h)
	}
}

// Len is the number of cached entries.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

// Live reports whether the listener is connected and the cache in use.
func (c *Cache) Live() bool { return c.live.Load() }

func (c *Cache) reset(live bool) {
	c.mu.Lock()
	c.gen.Add(1)
	c.entries = map[secret.Hash]cacheEntry{}
	c.clients = map[uuid.UUID]clientEntry{}
	c.live.Store(live)
	c.mu.Unlock()
}

// invalidate drops every entry of a client or a workspace.
func (c *Cache) invalidate(match func(Record) bool) {
	c.mu.Lock()
	c.gen.Add(1)
	for h, e := range c.entries {
		if !e.unknown && match(e.rec) {
			delete(c.entries, h)
		}
	}
	c.mu.Unlock()
}

func (c *Cache) handle(payload string) {
	kind, arg, _ := strings.Cut(payload, ":")
	switch kind {
	case "c":
		if id, err := uuid.Parse(arg); err == nil {
			c.invalidate(func(r Record) bool { return r.ClientID == id })
			c.mu.Lock()
			delete(c.clients, id)
			c.mu.Unlock()
			return
		}
	case "w":
		if id, err := uuid.Parse(arg); err == nil {
			c.invalidate(func(r Record) bool { return r.WorkspaceID == id })
			return
		}
	case "b":
		// Every notification before this one is applied: acknowledge, off
		// the listener's goroutine.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, _ = c.Pool.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, "a:"+arg)
		}()
		return
	case "a":
		c.barrierMu.Lock()
		if b, ok := c.barriers[arg]; ok {
			b.got++
			if b.got == b.need {
				close(b.done)
			}
		}
		c.barrierMu.Unlock()
		return
	}
	// Unknown payload: be safe.
	c.reset(true)
}

// Listen keeps a LISTEN connection open until ctx ends, reconnecting with
// backoff. The cache is live only while it is connected.
func (c *Cache) Listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.listenOnce(ctx)
		c.reset(false)
		if ctx.Err() != nil {
			return
		}
		if c.Log != nil {
			c.Log.Warn("token cache listener lost; caching off until it reconnects", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (c *Cache) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, c.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect listener: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Anything cached before this point may have missed a notification.
	c.reset(true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		c.handle(n.Payload)
	}
}

// Sync returns once every replica's cache has applied every invalidation
// committed before the call. A replica calls it after a change that
// invalidates tokens and before it answers, so the caller's next request,
// on any replica, is judged by the new state. It sends a barrier through
// the channel; each listening replica acknowledges it after applying what
// came before (notifications arrive in commit order), and Sync waits for
// as many acknowledgements as there are listeners, at most one second.
func (c *Cache) Sync(ctx context.Context) {
	if !c.live.Load() {
		return
	}
	var listeners int
	if err := c.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN `+Channel+`'`).Scan(&listeners); err != nil || listeners == 0 {
		listeners = 1
	}
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	b := &barrier{need: listeners, done: make(chan struct{})}
	c.barrierMu.Lock()
	if c.barriers == nil {
		c.barriers = map[string]*barrier{}
	}
	c.barriers[id] = b
	c.barrierMu.Unlock()
	defer func() {
		c.barrierMu.Lock()
		delete(c.barriers, id)
		c.barrierMu.Unlock()
	}()
	if _, err := c.Pool.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, "b:"+id); err != nil {
		return
	}
	select {
	case <-b.done:
	case <-ctx.Done():
	case <-time.After(time.Second):
		if c.Log != nil {
			c.Log.Warn("token cache barrier timed out; a replica may answer from a stale cache briefly", "acks", b.got, "listeners", listeners)
		}
	}
}
