// Package opaqueid formats the public ids of records: a short type prefix
// and the record's UUIDv7 in lower-case Crockford base32, e.g.
// "con_01jd3x…". Prefixes make an id's kind obvious in logs and support
// tickets; the time-ordered UUIDs keep primary key inserts local.
package opaqueid

import (
	"encoding/base32"

	"github.com/google/uuid"
)

// Prefixes of the public ids.
const (
	Workspace = "wks_"
	Member    = "mem_"
	Client    = "cli_"
	Contact   = "con_"
	Lead      = "lea_"
	Event     = "evt_"
	Webhook   = "whe_"
	// Field prefixes a custom field definition's id.
	Field = "fld_"
	// Audit prefixes an audit event's id ("aud_" and its number, not a
	// UUID: service/admin formats it); releases up to 1.1.0 gave it Event's.
	Audit = "aud_"
)

var enc = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

const encodedLen = 26

// New returns a fresh time-ordered UUID.
func New() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// Format renders id with prefix.
func Format(prefix string, id uuid.UUID) string {
	var buf [encodedLen]byte
	enc.Encode(buf[:], id[:])
	return prefix + string(buf[:])
}

// Parse reads an id with the given prefix. ok is false for anything that
// Format could not have produced.
func Parse(prefix, s string) (id uuid.UUID, ok bool) {
	if len(s) != len(prefix)+encodedLen || s[:len(prefix)] != prefix {
		return uuid.UUID{}, false
	}
	body := s[len(prefix):]
	n, err := enc.Decode(id[:], []byte(body))
	if err != nil || n != len(id) {
		return uuid.UUID{}, false
	}
	// Reject non-canonical spellings (stray low bits in the last character),
	// so every id has exactly one string form.
	var check [encodedLen]byte
	enc.Encode(check[:], id[:])
	if string(check[:]) != body {
		return uuid.UUID{}, false
	}
	return id, true
}
