// This file makes the opaque, tamper-evident page cursors of list
// endpoints. A cursor holds the keyset position (sort value, a time or a
// transaction id, and id) of the last record of a page, where in the
// database's history it was read when that is known (version 2), and an
// HMAC that binds it to the workspace, the resource, the sort and the
// filters it was made for. Using it with anything else, or changing a bit
// of it, fails verification: a cursor reveals nothing across workspaces
// and cannot be forged.

package listing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"

	"github.com/google/uuid"
)

// strict refuses non-canonical encodings, so each cursor has one spelling.
var strict = base64.RawURLEncoding.Strict()

// ErrInvalidCursor is any cursor that does not verify.
var ErrInvalidCursor = errors.New("cursor: invalid")

const (
	// version 1 is a position alone; version 2 adds its Origin. A cursor
	// without an origin is still made as version 1, byte for byte as
	// before, and both decode.
	version    = 1
	version2   = 2
	payloadLen = 1 + 8 + 16
	originLen  = 4 + 8
	macLen     = 16
)

// Binding is what a cursor is valid for.
type Binding struct {
	Workspace uuid.UUID
	// Resource names the list, e.g. "contacts".
	Resource string
	// Sort is the sort parameter, e.g. "-createdAt".
	Sort string
	// Filters is a canonical rendering of the list's filters.
	Filters string
	// Key names the kind of sort value when it is not a time: "xid" for
	// the change_xid of the sync walk.
	Key string
}

// Position is a keyset position.
type Position struct {
	// Key is the sort value: microseconds since the Unix epoch for a time
	// sort, the change_xid for the sync walk.
	Key int64
	ID  uuid.UUID
	// Origin is where in the database's history a transaction-id position
	// was read; zero when not known.
	Origin Origin
}

// Origin is where a page was read: the PostgreSQL timeline of the primary
// and its WAL insert position then, or on a standby (reads on standbys)
// the timeline it replays and the end of the WAL it has received
// (migration 00114). A transaction-id position is only meaningful in that
// history: after a failover the new primary may hand out again the ids
// of transactions the old one discarded (migration 00108). The zero
// Origin is unknown: a cursor made before cursors carried one.
type Origin struct {
	Timeline int32
	// WAL is the insert (on a standby, received) position, in bytes.
	WAL int64
}

// Known reports whether o names a timeline.
func (o Origin) Known() bool { return o.Timeline != 0 }

// Cursors signs and verifies cursors with a key every replica shares.
type Cursors struct{ key []byte }

// New returns a codec. key should hold at least 32 random bytes.
func NewCursors(key []byte) Cursors { return Cursors{key: append([]byte(nil), key...)} }

// Encode returns the cursor of pos under b.
func (c Cursors) Encode(b Binding, pos Position) string {
	var buf [payloadLen + originLen + macLen]byte
	buf[0] = version
	binary.BigEndian.PutUint64(buf[1:9], uint64(pos.Key))
	copy(buf[9:25], pos.ID[:])
	n := payloadLen
	if pos.Origin.Known() {
		buf[0] = version2
		binary.BigEndian.PutUint32(buf[25:29], uint32(pos.Origin.Timeline))
		binary.BigEndian.PutUint64(buf[29:37], uint64(pos.Origin.WAL))
		n += originLen
	}
	copy(buf[n:], c.mac(b, buf[:n]))
	return base64.RawURLEncoding.EncodeToString(buf[:n+macLen])
}

// Decode verifies s under b and returns its position.
func (c Cursors) Decode(b Binding, s string) (Position, error) {
	var buf [payloadLen + originLen + macLen]byte
	var n int
	switch base64.RawURLEncoding.DecodedLen(len(s)) {
	case payloadLen + macLen:
		n = payloadLen
	case payloadLen + originLen + macLen:
		n = payloadLen + originLen
	default:
		return Position{}, ErrInvalidCursor
	}
	if got, err := strict.Decode(buf[:], []byte(s)); err != nil || got != n+macLen {
		return Position{}, ErrInvalidCursor
	}
	want := byte(version)
	if n > payloadLen {
		want = version2
	}
	if buf[0] != want || !hmac.Equal(buf[n:n+macLen], c.mac(b, buf[:n])) {
		return Position{}, ErrInvalidCursor
	}
	var pos Position
	pos.Key = int64(binary.BigEndian.Uint64(buf[1:9]))
	copy(pos.ID[:], buf[9:25])
	if n > payloadLen {
		pos.Origin = Origin{
			Timeline: int32(binary.BigEndian.Uint32(buf[25:29])),
			WAL:      int64(binary.BigEndian.Uint64(buf[29:37])),
		}
		if !pos.Origin.Known() {
			// Made by Encode only with a timeline: one spelling per cursor.
			return Position{}, ErrInvalidCursor
		}
	}
	return pos, nil
}

func (c Cursors) mac(b Binding, payload []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(b.Workspace[:])
	parts := []string{b.Resource, b.Sort, b.Filters}
	if b.Key != "" {
		// Only when set, so time cursors made before Key existed verify.
		parts = append(parts, b.Key)
	}
	for _, s := range parts {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		m.Write(n[:])
		m.Write([]byte(s))
	}
	m.Write(payload)
	return m.Sum(nil)[:macLen]
}
