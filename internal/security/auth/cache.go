package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/internal/security/secret"
)

// Channel is the PostgreSQL NOTIFY channel of token invalidations (the
// generated queries AuthFeedListen and AuthFeedNotify name it). The
// triggers of migration 00002 send "c:<client id>" and "w:<workspace id>"
// on it. Replicas send "h:<replica>:<sent>" heartbeats, "b:<barrier>"
// barriers ([Cache.Sync]) and "a:<barrier>:<replica>" acknowledgements.
const Channel = "partner_auth"

// Cache is an in-process token cache in front of a [Store]. A repeated
// request needs no database round trip. It stays correct across replicas
// through LISTEN/NOTIFY: every change a token check depends on (revocation,
// rotation, deactivation, activation, revocation of the client, workspace
// rename) notifies every replica, which drops the affected entries.
//
// A feed that is silent cannot be told from a feed with nothing to say, so
// each replica proves its own: it sends itself a heartbeat through the
// same channel every [Cache.Heartbeat], and trusts its cache only while
// the last heartbeat it received was sent less than [Cache.Trust] ago.
// Notifications arrive in commit order, so that heartbeat proves every
// invalidation committed before it was sent has been applied: a cache
// that is trusted is at most Trust behind the database. A feed silent for
// longer (a half-open connection, a frozen backend) is reconnected, and
// the cache is emptied whenever the listening session is new.
type Cache struct {
	Store Store
	// Clients is the API client lookup of the token endpoint, cached the
	// same way (optional).
	Clients ClientStore
	// DB carries the listening session, heartbeats, barriers and
	// acknowledgements.
	DB *db.DB
	// MaxEntries bounds memory; default 100,000 (about 25 MB).
	MaxEntries int
	// TTL bounds the age of any entry, as a backstop; default 5 minutes.
	TTL time.Duration
	// UnknownTTL is how long an unknown token hash is remembered, so garbage
	// tokens with valid checksums cannot hammer the database; default 1
	// minute.
	UnknownTTL time.Duration
	// Trust is how long a heartbeat proves the feed alive; default 2 s.
	Trust time.Duration
	// Heartbeat is how often a replica sends itself one; default Trust/8.
	Heartbeat time.Duration
	Log       *slog.Logger

	initOnce sync.Once
	id       string    // this replica, in heartbeats and acknowledgements
	epoch    time.Time // heartbeats carry their send time as nanoseconds since epoch

	mu      sync.RWMutex
	entries map[secret.Hash]cacheEntry
	clients map[uuid.UUID]clientEntry
	// clientGen and workspaceGen count invalidations per client and per
	// workspace; an entry stored under older counts is stale. Invalidation
	// is then O(1), with no scan of the entries.
	clientGen    map[uuid.UUID]uint64
	workspaceGen map[uuid.UUID]uint64
	// gen changes on every invalidation; a lookup that raced with one does
	// not store its (possibly stale) result.
	gen atomic.Uint64

	// session is the listening session's number while it is open, 0 when
	// there is none.
	session atomic.Uint64
	// proven is the send time (ns since epoch) of the latest heartbeat of
	// this replica received on the current session; opened is when that
	// session began listening. Only a heartbeat sent after that proves it.
	proven atomic.Int64
	opened atomic.Int64
	pid    atomic.Uint32

	feedMu   sync.Mutex
	peers    map[string]time.Time // replica -> when its last heartbeat arrived
	barriers map[string]*barrier
	acks     chan string // acknowledgements to send, off the listener's goroutine
	wake     chan struct{}
}

type clientEntry struct {
	c       Client
	unknown bool
	expires time.Time
}

type cacheEntry struct {
	rec      Record
	unknown  bool
	expires  time.Time
	clientG  uint64
	workspcG uint64
}

func (c *Cache) init() {
	c.initOnce.Do(func() {
		var raw [8]byte
		_, _ = rand.Read(raw[:])
		c.id = hex.EncodeToString(raw[:])
		c.epoch = time.Now()
		c.proven.Store(-1 << 62)
		c.acks = make(chan string, 256)
		c.wake = make(chan struct{}, 1)
		c.mu.Lock()
		c.resetLocked()
		c.mu.Unlock()
		c.feedMu.Lock()
		c.peers = map[string]time.Time{}
		c.barriers = map[string]*barrier{}
		c.feedMu.Unlock()
	})
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

func (c *Cache) trust() time.Duration {
	if c.Trust > 0 {
		return c.Trust
	}
	return 2 * time.Second
}

func (c *Cache) heartbeat() time.Duration {
	if c.Heartbeat > 0 {
		return c.Heartbeat
	}
	return c.trust() / 8
}

// silence is how long the feed may go without a heartbeat of this replica
// before the session is given up and opened again.
func (c *Cache) silence() time.Duration { return c.trust() + c.trust()/2 }

// since is now, in the heartbeats' clock.
func (c *Cache) since() int64 { return int64(time.Since(c.epoch)) }

// Live reports whether the cache is trusted: the listening session is
// open and this replica's last heartbeat came back less than Trust ago.
func (c *Cache) Live() bool {
	c.init()
	return c.session.Load() != 0 && c.since()-c.proven.Load() < int64(c.trust())
}

// ListenerPID is the backend process id of the listening session, 0 when
// there is none (tests freeze or kill it).
func (c *Cache) ListenerPID() uint32 {
	if c.session.Load() == 0 {
		return 0
	}
	return c.pid.Load()
}

// LookupToken implements [Store].
func (c *Cache) LookupToken(ctx context.Context, hash secret.Hash) (Record, error) {
	if !c.Live() {
		return c.Store.LookupToken(ctx, hash)
	}
	now := time.Now()
	c.mu.RLock()
	e, ok := c.entries[hash]
	fresh := ok && now.Before(e.expires) &&
		(e.unknown || (e.clientG == c.clientGen[e.rec.ClientID] && e.workspcG == c.workspaceGen[e.rec.WorkspaceID]))
	c.mu.RUnlock()
	if fresh {
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
	if c.gen.Load() == gen && c.Live() {
		if len(c.entries) >= c.maxEntries() {
			evict(c.entries, c.maxEntries())
		}
		c.entries[hash] = cacheEntry{rec: rec, unknown: unknown, expires: now.Add(c.ttl(unknown)),
			clientG: c.clientGen[rec.ClientID], workspcG: c.workspaceGen[rec.WorkspaceID]}
	}
	c.mu.Unlock()
	return rec, err
}

// LookupClient implements [ClientStore].
func (c *Cache) LookupClient(ctx context.Context, id uuid.UUID) (Client, error) {
	if !c.Live() {
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
	if c.gen.Load() == gen && c.Live() {
		if len(c.clients) >= c.maxEntries() {
			evict(c.clients, c.maxEntries())
		}
		c.clients[id] = clientEntry{c: cl, unknown: unknown, expires: now.Add(c.ttl(unknown))}
	}
	c.mu.Unlock()
	return cl, err
}

// evict drops about one percent of a full map, at random (Go's map order
// is random): the work per insert stays constant, never a scan of the
// whole map under the lock.
func evict[K comparable, V any](m map[K]V, limit int) {
	drop := max(1, limit/100)
	for k := range m {
		if drop == 0 {
			return
		}
		delete(m, k)
		drop--
	}
}

// Len is the number of cached token entries.
func (c *Cache) Len() int {
	c.init()
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

func (c *Cache) resetLocked() {
	c.gen.Add(1)
	c.entries = map[secret.Hash]cacheEntry{}
	c.clients = map[uuid.UUID]clientEntry{}
	c.clientGen = map[uuid.UUID]uint64{}
	c.workspaceGen = map[uuid.UUID]uint64{}
}

func (c *Cache) reset() {
	c.mu.Lock()
	c.resetLocked()
	c.mu.Unlock()
}

// handle applies one message of the feed, in order. It reports whether
// the message was a heartbeat of this replica.
func (c *Cache) handle(payload string) (own bool) {
	kind, arg, _ := strings.Cut(payload, ":")
	switch kind {
	case "c":
		if id, err := uuid.Parse(arg); err == nil {
			c.mu.Lock()
			c.gen.Add(1)
			c.clientGen[id]++
			delete(c.clients, id)
			c.mu.Unlock()
			return false
		}
	case "w":
		if id, err := uuid.Parse(arg); err == nil {
			c.mu.Lock()
			c.gen.Add(1)
			c.workspaceGen[id]++
			c.mu.Unlock()
			return false
		}
	case "h":
		replica, sent, _ := strings.Cut(arg, ":")
		now := time.Now()
		c.feedMu.Lock()
		c.peers[replica] = now
		c.feedMu.Unlock()
		if replica != c.id {
			return false
		}
		ns, err := strconv.ParseInt(sent, 10, 64)
		if err != nil || ns < c.opened.Load() {
			return false // sent before this session listened: proves nothing of it
		}
		if ns > c.proven.Load() {
			c.proven.Store(ns)
		}
		return true
	case "b":
		id, _, _ := strings.Cut(arg, ":")
		c.feedMu.Lock()
		b, mine := c.barriers[id]
		if mine {
			c.arrivedLocked(b)
		}
		c.feedMu.Unlock()
		if !mine {
			// Every notification before the barrier is applied: acknowledge.
			// A full queue drops it; the sender then waits out its deadline,
			// which is safe.
			select {
			case c.acks <- "a:" + id + ":" + c.id:
			default:
			}
		}
		return false
	case "a":
		id, replica, _ := strings.Cut(arg, ":")
		c.feedMu.Lock()
		if b, ok := c.barriers[id]; ok && replica != "" {
			if !b.arrived {
				b.need[replica] = false // acknowledged ahead of the barrier's return
			} else {
				delete(b.need, replica)
				if len(b.need) == 0 {
					close(b.done)
					delete(c.barriers, id)
				}
			}
		}
		c.feedMu.Unlock()
		return false
	}
	// Unknown payload: be safe.
	c.reset()
	return false
}
