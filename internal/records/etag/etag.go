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

	"github.com/svat/partnerapi/internal/contract/apierror"
)

// Header, IfMatch and IfNoneMatch are the header names.
const (
	Header      = "ETag"
	IfMatch     = "If-Match"
	IfNoneMatch = "If-None-Match"
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
// and dropping it would apply the update unconditionally. A member that
// is not an entity tag (an unquoted ETag, say) is a 400 naming the
// header: a 412 would tell the caller the record changed when it did not.
func Check(ifMatch []string, current string) error {
	if len(ifMatch) == 0 {
		return nil
	}
	tags, err := parse(IfMatch, ifMatch)
	if err != nil {
		return err
	}
	for _, tag := range tags {
		if tag == "*" || tag == current {
			return nil
		}
	}
	return apierror.New(apierror.CodePreconditionFailed, "the record has changed since the ETag in If-Match was issued; read it again and retry")
}

// NotModified reports whether If-None-Match field lines name current,
// compared weakly as RFC 9110 §13.1.2 says (W/"x" matches "x"), or are
// "*": a GET then answers 304 with no body. Malformed lines are a 400
// naming the header, as for If-Match.
func NotModified(ifNoneMatch []string, current string) (bool, error) {
	if len(ifNoneMatch) == 0 || current == "" {
		return false, nil
	}
	tags, err := parse(IfNoneMatch, ifNoneMatch)
	if err != nil {
		return false, err
	}
	for _, tag := range tags {
		if tag == "*" || strings.TrimPrefix(tag, "W/") == strings.TrimPrefix(current, "W/") {
			return true, nil
		}
	}
	return false, nil
}

// parse splits field lines into their members: "*" or entity tags
// (RFC 9110 §8.8.3: an optional W/, then a quoted string of visible
// characters other than the double quote). Empty members are skipped,
// as §5.6.1 allows.
func parse(header string, lines []string) ([]string, error) {
	var tags []string
	for _, line := range lines {
		for _, tag := range strings.Split(line, ",") {
			tag = strings.TrimSpace(tag)
			switch {
			case tag == "":
				continue
			case tag == "*" || isEntityTag(tag):
				tags = append(tags, tag)
			default:
				msg := header + " must list entity tags as the ETag header sent them, in double quotes (e.g. \"abc\"), or *"
				e := apierror.Malformed(msg)
				e.Fields = []apierror.FieldViolation{{Field: header, Code: "invalid_format", Message: msg}}
				return nil, e
			}
		}
	}
	return tags, nil
}

func isEntityTag(s string) bool {
	s = strings.TrimPrefix(s, "W/")
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c == '"' || c < 0x21 || c == 0x7f {
			return false
		}
	}
	return true
}
