// Package eventtype names the types of the event feed and the scope that
// reads each, for the feed, the webhook endpoints and the OpenAPI document
// alike. It sits with the scopes because what it decides is who may read
// which events: the feed and the endpoint checks test a token's scopes
// against it.
//
// The database does not list the names: migration 00117 dropped the CHECK
// on events.type, and the events are written by partner_record_events
// (the trigger of contacts and leads: "<kind>.created", ".updated",
// ".deleted") and lead_create_requests ("contact.created",
// "lead.created"). A type written there must be listed here: the feed
// reads only the types of All its token may read, and an endpoint
// subscribes only to types Lookup knows.
// TestEveryCommittedWriteHasItsEvent (service/event) reads the writes'
// events back through the feed.
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
