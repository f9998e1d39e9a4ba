// This file makes the opaque, tamper-evident page cursors of list
// endpoints. A cursor holds the keyset position (sort value, a time or a
// transaction id, and id) of the last record of a page, and an HMAC that binds it to the workspace, the
// resource, the sort and the filters it was made for. Using it with anything
// else, or changing a bit of it, fails verification: a cursor reveals
// nothing across workspaces and cannot be forged.

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
	version    = 1
	payloadLen = 1 + 8 + 16
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
}

// Cursors signs and verifies cursors with a key every replica shares.
type Cursors struct{ key []byte }

// New returns a codec. key should hold at least 32 random bytes.
func NewCursors(key []byte) Cursors { return Cursors{key: append([]byte(nil), key...)} }

// Encode returns the cursor of pos under b.
func (c Cursors) Encode(b Binding, pos Position) string {
	var buf [payloadLen + macLen]byte
	buf[0] = version
	binary.BigEndian.PutUint64(buf[1:9], uint64(pos.Key))
	copy(buf[9:25], pos.ID[:])
	copy(buf[payloadLen:], c.mac(b, buf[:payloadLen]))
	return base64.RawURLEncoding.EncodeToString(buf[:])
}

// Decode verifies s under b and returns its position.
func (c Cursors) Decode(b Binding, s string) (Position, error) {
	var buf [payloadLen + macLen]byte
	if base64.RawURLEncoding.DecodedLen(len(s)) != len(buf) {
		return Position{}, ErrInvalidCursor
	}
	if n, err := strict.Decode(buf[:], []byte(s)); err != nil || n != len(buf) {
		return Position{}, ErrInvalidCursor
	}
	if buf[0] != version || !hmac.Equal(buf[payloadLen:], c.mac(b, buf[:payloadLen])) {
		return Position{}, ErrInvalidCursor
	}
	var pos Position
	pos.Key = int64(binary.BigEndian.Uint64(buf[1:9]))
	copy(pos.ID[:], buf[9:25])
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
