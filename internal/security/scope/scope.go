// Package scope knows the OAuth scopes and holds sets of them as a bit set,
// so the scope check on every request is one AND.
package scope

import "strings"

// Set is a set of known scopes.
type Set uint8

// The known scopes, in canonical order.
const (
	ContactsRead Set = 1 << iota
	ContactsWrite
	LeadsRead
	LeadsWrite
	AppsRead
	WebhooksRead
	WebhooksWrite
	FieldsWrite
)

// All is every known scope.
const All = ContactsRead | ContactsWrite | LeadsRead | LeadsWrite | AppsRead | WebhooksRead | WebhooksWrite | FieldsWrite

var names = [...]string{"contacts:read", "contacts:write", "leads:read", "leads:write", "apps:read", "webhooks:read", "webhooks:write", "fields:write"}

// Names lists the known scope names in canonical order.
func Names() []string { return append([]string(nil), names[:]...) }

// Lookup returns the scope named name.
func Lookup(name string) (Set, bool) {
	for i, n := range names {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// FromNames builds a set. unknown is the first name that is not a known
// scope, or "" when all are known.
func FromNames(list []string) (s Set, unknown string) {
	for _, n := range list {
		b, ok := Lookup(n)
		if !ok {
			return 0, n
		}
		s |= b
	}
	return s, ""
}

// FromStored builds the set of a stored client or token, keeping the
// scopes this binary knows and returning the others. A scope a newer
// replica wrote during a rollout must neither zero the whole set (the
// token would lose what it may do) nor be granted by a binary that does
// not know what it guards.
func FromStored(list []string) (s Set, unknown []string) {
	for _, n := range list {
		if b, ok := Lookup(n); ok {
			s |= b
		} else {
			unknown = append(unknown, n)
		}
	}
	return s, unknown
}

// Parse reads a space-delimited scope parameter (RFC 6749 §3.3).
func Parse(param string) (s Set, unknown string) {
	return FromNames(strings.FieldsFunc(param, func(r rune) bool { return r == ' ' }))
}

// Has reports whether s contains every scope of want.
func (s Set) Has(want Set) bool { return s&want == want }

// Names lists the scopes of s in canonical order.
func (s Set) Names() []string {
	out := make([]string, 0, len(names))
	for i, n := range names {
		if s&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// String is the space-delimited form used in token responses.
func (s Set) String() string { return strings.Join(s.Names(), " ") }
