// Package idempotency gives POST creates Stripe-style Idempotency-Key
// semantics, per client and path, for at least 24 hours:
//
//   - the same key with the same body replays the first response;
//   - the same key with another body is refused (422);
//   - the same key while the first request is in flight is refused (409);
//   - failures are not stored, so a corrected retry may reuse the key.
//
// The work is done by the database, in the same statement as the create
// (idempotency_claim and idempotency_save in db/functions): a
// transaction-scoped advisory lock on the key detects a request in flight
// without blocking, and the stored answer commits with the record or not
// at all. This package checks the key, hashes the request, and turns the
// database's refusals into API errors.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/contract/apierror"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// ReplayedHeader marks a replayed response.
const ReplayedHeader = "Idempotent-Replayed"

// TTL is how long a key is remembered.
const TTL = 24 * time.Hour

// MaxKeyLen bounds the key.
const MaxKeyLen = 255

// Key is the Idempotency-Key of one request, ready for the database. The
// zero Key means the request sent none.
type Key struct {
	workspace, client uuid.UUID
	path              string
	text              string
	hash              []byte
	lock              int64
	fresh             time.Time
}

// NewKey checks the Idempotency-Key of a request's header and binds it to
// the client's workspace and id, the path and the request, whose
// deterministic protobuf encoding is hashed so that a retry with the same
// body (however its JSON was spelled) matches. No Idempotency-Key gives
// the zero Key. Two Idempotency-Key field lines are refused, not one of
// them picked (a proxy in between may have keyed on the other), and so is
// an empty one, which would otherwise leave a retried create unguarded.
func NewKey(workspace, client uuid.UUID, path string, header http.Header, req proto.Message) (Key, error) {
	values := header.Values(Header)
	if len(values) == 0 {
		return Key{}, nil
	}
	if len(values) > 1 {
		e := apierror.Malformed("send exactly one Idempotency-Key header")
		e.Fields = []apierror.FieldViolation{{Field: Header, Code: "invalid_format", Message: "is repeated"}}
		return Key{}, e
	}
	key := values[0]
	if err := checkKey(key); err != nil {
		return Key{}, err
	}
	body, err := hashed(req)
	if err != nil {
		return Key{}, fmt.Errorf("hash request: %w", err)
	}
	sum := sha256.Sum256(body)
	return Key{workspace: workspace, client: client, path: path, text: key, hash: sum[:],
		lock: lockKey(workspace, client, path, key), fresh: time.Now().Add(-TTL)}, nil
}

// Vary binds k also to part: something of the request that is not in its
// body but changes its answer, as HTTP's Vary does for caches. A retry
// with the same key and body but another part is then refused as another
// request (422), rather than replayed an answer made for the first: the
// answer may hold what only the first caller was allowed to see. The zero
// Key stays zero.
func (k Key) Vary(part string) Key {
	if k.text == "" {
		return k
	}
	h := sha256.New()
	h.Write(k.hash)
	h.Write([]byte{0})
	h.Write([]byte(part))
	k.hash = h.Sum(nil)
	return k
}

// Args are the key arguments of the create queries (ContactCreate,
// LeadCreate): all nil for the zero Key.
func (k Key) Args() (key *string, requestHash []byte, lock *int64, freshSince *time.Time) {
	if k.text == "" {
		return nil, nil, nil, nil
	}
	return &k.text, k.hash, &k.lock, &k.fresh
}

// InTx runs fn, which writes the answer of a create into resp, in one
// transaction under k: with a key, the answer an earlier request with the
// same key and body stored is unmarshalled into resp instead and replayed
// is true; otherwise resp is stored, as protobuf, with the records fn made,
// in the same transaction. Creates that are not one statement (batches)
// use it.
func InTx(ctx context.Context, d *db.DB, k Key, resp proto.Message, fn func(tx db.DBTX) error) (replayed bool, err error) {
	err = d.WithTx(ctx, func(tx db.DBTX) error {
		if k.text != "" {
			stored, err := db.Q.IdempotencyClaim(ctx, tx, dbsqlc.IdempotencyClaimParams{
				WorkspaceID: k.workspace, ClientID: k.client, Path: k.path, Key: k.text,
				RequestHash: k.hash, LockKey: k.lock, FreshSince: k.fresh,
			})
			if refused := Refusal(err); refused != nil {
				return refused
			}
			if err != nil {
				return fmt.Errorf("claim idempotency key: %w", err)
			}
			if stored != nil {
				replayed = true
				if err := proto.Unmarshal(stored, resp); err != nil {
					return fmt.Errorf("decode stored answer: %w", err)
				}
				return nil
			}
		}
		if err := fn(tx); err != nil {
			return err
		}
		if k.text == "" {
			return nil
		}
		stored, err := encodeAnswer(resp)
		if err != nil {
			return fmt.Errorf("encode answer: %w", err)
		}
		if err := db.Q.IdempotencySave(ctx, tx, dbsqlc.IdempotencySaveParams{
			WorkspaceID: k.workspace, ClientID: k.client, Path: k.path, Key: k.text, RequestHash: k.hash, Response: stored,
		}); err != nil {
			return fmt.Errorf("store answer: %w", err)
		}
		return nil
	})
	return replayed, err
}

// lockKey maps a key to the 64-bit advisory lock id that marks it in
// flight. A collision would only make an unrelated request wait for a retry.
func lockKey(workspace, client uuid.UUID, path, key string) int64 {
	h := sha256.New()
	h.Write(workspace[:])
	h.Write(client[:])
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int64(binary.BigEndian.Uint64(h.Sum(nil)[:8]))
}

func checkKey(key string) error {
	bad := key == "" || len(key) > MaxKeyLen
	for i := 0; i < len(key) && !bad; i++ {
		bad = key[i] < 0x20 || key[i] > 0x7e
	}
	if bad {
		e := apierror.Malformed("Idempotency-Key must be 1 to 255 printable ASCII characters")
		e.Fields = []apierror.FieldViolation{{Field: Header, Code: "invalid_format", Message: "must be 1 to 255 printable ASCII characters"}}
		return e
	}
	return nil
}

// Refusal returns the API error for a create the database refused because
// of its key (in flight: 409; reused with another body: 422), or nil for
// any other error.
func Refusal(err error) error {
	switch {
	case errors.Is(err, db.ErrKeyInFlight):
		return apierror.New(apierror.CodeIdempotencyInFlight, "a request with this Idempotency-Key is still in progress; retry later")
	case errors.Is(err, db.ErrKeyReused):
		return apierror.New(apierror.CodeIdempotencyMismatch, "this Idempotency-Key was used with a different request body")
	}
	return nil
}

// Sweep deletes keys older than the TTL. The server runs it hourly.
func Sweep(ctx context.Context, d *db.DB) (int64, error) {
	n, err := db.Q.IdempotencyDeleteExpired(ctx, d.Conn(), time.Now().Add(-TTL-time.Hour))
	if err != nil {
		return 0, fmt.Errorf("sweep idempotency keys: %w", err)
	}
	return n, nil
}

// Erase deletes, in the caller's transaction, every stored answer of the
// workspace that holds one of the deleted records (ids, and the same
// records' opaque ids as answers spell them): erasure leaves no copy of a
// record's data behind. A retry of such a request's key afterwards runs
// as a new request.
func Erase(ctx context.Context, q db.DBTX, workspace uuid.UUID, ids []uuid.UUID, opaqueIDs []string) error {
	if _, err := db.Q.IdempotencyErase(ctx, q, dbsqlc.IdempotencyEraseParams{
		WorkspaceID: workspace, IDs: ids, OpaqueIDs: opaqueIDs,
	}); err != nil {
		return fmt.Errorf("erase stored answers: %w", err)
	}
	return nil
}
