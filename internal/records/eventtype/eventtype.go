// Package eventtype names the types of the event feed and the scope that
// reads each, for the feed, the webhook endpoints and the OpenAPI document
// alike. The database's CHECK on events.type (migration 00100) lists the
// same names; TestTypesAreTheTableCheck holds the two together.
package eventtype

import "github.com/svat/partnerapi/internal/security/scope"

// Type is an event type and the scope that reads it.
type Type struct {
	Name string
	// Scope reads events of this type; ScopeName spells it.
	Scope     scope.Set
	ScopeName string
}

// All are the event types, in the order the docs list them.
var All = []Type{
	{"contact.created", scope.ContactsRead, "contacts:read"},
	{"contact.updated", scope.ContactsRead, "contacts:read"},
	{"contact.deleted", scope.ContactsRead, "contacts:read"},
	{"lead.created", scope.LeadsRead, "leads:read"},
	{"lead.updated", scope.LeadsRead, "leads:read"},
	{"lead.deleted", scope.LeadsRead, "leads:read"},
}

// Names are the names of All.
func Names() []string {
	out := make([]string, len(All))
	for i, t := range All {
		out[i] = t.Name
	}
	return out
}

// Lookup finds a type by name.
func Lookup(name string) (Type, bool) {
	for _, t := range All {
		if t.Name == name {
			return t, true
		}
	}
	return Type{}, false
}
