// Package idempotency gives POST creates Stripe-style Idempotency-Key
// semantics, per client and path, for at least 24 hours:
//
//   - the same key with the same body replays the first response;
//   - the same key with another body is refused (422);
//   - the same key while the first request is in flight is refused (409);
//   - failures are not stored, so a corrected retry may reuse the key.
//
// The create and the stored response commit in one transaction, so a
// response is either both created and remembered or neither. A
// transaction-scoped advisory lock on the key detects requests in flight
// without blocking. The whole transaction takes two round trips (see
// [Create]): the create's own lookups ride with the key's, and its inserts
// with the stored response and the COMMIT.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/apierror"
	"github.com/svat/partnerapi/internal/auth"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// ReplayedHeader marks a replayed response.
const ReplayedHeader = "Idempotent-Replayed"

// TTL is how long a key is remembered.
const TTL = 24 * time.Hour

// MaxKeyLen bounds the key.
const MaxKeyLen = 255

// Create runs a create as one transaction in two round trips to
// PostgreSQL. The first sends BEGIN, the key's lock and lookup, and the
// lookups read queues; the second sends the statements write queues (built
// from what the lookups found), the stored response and COMMIT. With a key
// it first replays a stored response or refuses a key in flight or reused.
// newResp makes an empty response to unmarshal a replay into.
//
// Statements that fail (a unique violation, say) abort the transaction and
// come back as the error, for the caller to map.
func Create[T proto.Message](ctx context.Context, d *db.DB, p *auth.Principal, path, key string, req proto.Message,
	newResp func() T, read func(pl *db.Pipeline), write func(pl *db.Pipeline) (T, error)) (resp T, replayed bool, err error) {
	var reqHash [sha256.Size]byte
	var lockKey int64
	if key != "" {
		if err := checkKey(key); err != nil {
			return resp, false, err
		}
		body, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
		if err != nil {
			return resp, false, fmt.Errorf("hash request: %w", err)
		}
		reqHash = sha256.Sum256(body)
		lockKey = lockKeyOf(p, path, key)
	}
	err = d.WithSession(ctx, func(s *db.Session) error {
		pl := s.Pipeline()
		pl.Exec("BEGIN")
		var locked bool
		var lockErr, getErr error
		var row dbsqlc.IdempotencyGetRow
		if key != "" {
			pl.Go(func(tx db.DBTX) { locked, lockErr = db.Q.IdempotencyTryLock(ctx, tx, lockKey) })
			pl.Go(func(tx db.DBTX) {
				row, getErr = db.Q.IdempotencyGet(ctx, tx, dbsqlc.IdempotencyGetParams{
					WorkspaceID: p.WorkspaceID, ClientID: p.ClientID, Path: path, Key: key,
				})
			})
		}
		if read != nil {
			read(pl)
		}
		if err := pl.Flush(ctx); err != nil {
			return err
		}
		if key != "" {
			switch {
			case lockErr != nil:
				return fmt.Errorf("lock idempotency key: %w", lockErr)
			case !locked:
				return apierror.New(apierror.CodeIdempotencyInFlight, "a request with this Idempotency-Key is still in progress; retry later")
			case getErr == nil && time.Since(row.CreatedAt) < TTL:
				if string(row.RequestHash) != string(reqHash[:]) {
					return apierror.New(apierror.CodeIdempotencyMismatch, "this Idempotency-Key was used with a different request body")
				}
				resp = newResp()
				if err := proto.Unmarshal(row.Response, resp); err != nil {
					return fmt.Errorf("decode stored response: %w", err)
				}
				replayed = true
				return nil // the session rolls the read-only transaction back
			case getErr != nil && !errors.Is(getErr, db.ErrNotFound):
				return fmt.Errorf("get idempotency key: %w", getErr)
			}
		}
		if resp, err = write(pl); err != nil {
			return err
		}
		if key != "" {
			stored, err := proto.Marshal(resp)
			if err != nil {
				return fmt.Errorf("encode response: %w", err)
			}
			pl.Go(func(tx db.DBTX) {
				_ = db.Q.IdempotencySave(ctx, tx, dbsqlc.IdempotencySaveParams{
					WorkspaceID: p.WorkspaceID, ClientID: p.ClientID, Path: path, Key: key,
					RequestHash: reqHash[:], Response: stored,
				})
			})
		}
		pl.Exec("COMMIT")
		return pl.Flush(ctx)
	})
	return resp, replayed, err
}

// lockKeyOf maps a key to the 64-bit advisory lock id that marks it in
// flight. A collision would only make an unrelated request wait for a retry.
func lockKeyOf(p *auth.Principal, path, key string) int64 {
	h := sha256.New()
	h.Write(p.WorkspaceID[:])
	h.Write(p.ClientID[:])
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int64(binary.BigEndian.Uint64(h.Sum(nil)[:8]))
}

func checkKey(key string) error {
	bad := len(key) > MaxKeyLen
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

// Sweep deletes keys older than the TTL. The server runs it hourly.
func Sweep(ctx context.Context, d *db.DB) (int64, error) {
	n, err := db.Q.IdempotencyDeleteExpired(ctx, d.Conn(), time.Now().Add(-TTL-time.Hour))
	if err != nil {
		return 0, fmt.Errorf("sweep idempotency keys: %w", err)
	}
	return n, nil
}
