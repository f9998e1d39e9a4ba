// Package etag makes the entity tags of single records and checks the
// If-Match header against them (RFC 9110 §8.8.3, §13.1.1), so that a
// client can update a record only if nobody changed it since it read it.
package etag

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/internal/edge/apierror"
)

// Header and IfMatch are the header names.
const (
	Header  = "ETag"
	IfMatch = "If-Match"
)

// Of is the strong entity tag of a record's current version: a digest of
// its id, the transaction that last changed it and its updatedAt, so it
// changes with every write and reveals none of them.
func Of(id uuid.UUID, changeXID int64, updatedAt time.Time) string {
	var b [16 + 8 + 8]byte
	copy(b[:16], id[:])
	binary.BigEndian.PutUint64(b[16:24], uint64(changeXID))
	binary.BigEndian.PutUint64(b[24:], uint64(updatedAt.UnixMicro()))
	sum := sha256.Sum256(b[:])
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
}

// Check returns the 412 for If-Match field lines (the request's
// header values) that current does not satisfy, or nil. No If-Match
// always passes. Several lines are one list (RFC 9110 §5.3): a request
// passes when "*" or one of the listed tags equals current, compared
// strongly, so a weak tag never matches. A list that names no tag at all
// (an empty If-Match) matches nothing: it was sent to guard the update,
// and dropping it would apply the update unconditionally.
func Check(ifMatch []string, current string) error {
	if len(ifMatch) == 0 {
		return nil
	}
	for _, line := range ifMatch {
		for _, tag := range strings.Split(line, ",") {
			if tag = strings.TrimSpace(tag); tag == "*" || tag == current {
				return nil
			}
		}
	}
	return apierror.New(apierror.CodePreconditionFailed, "the record has changed since the ETag in If-Match was issued; read it again and retry")
}
