package jsoncodec

import (
	"errors"
	"testing"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
)

// TestMembersAreNamedAsSent: a member the message has not, or a proto
// spelling, is refused with its path as sent, at any depth and inside
// lists; the JSON names pass.
func TestMembersAreNamedAsSent(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"contacts":[{"email":"a@x.co"},{"email":"b@x.co","job_title":"x"}]}`: "contacts.job_title",
		`{"contacts":[{"email":"a@x.co","bogus":null}]}`:                       "contacts.bogus",
		`{"contacts":[{"email":"a@x.co","jobTitle":"x"}]}`:                     "",
		`{"email":"a@x.co"}`: "email",
	} {
		var m contactv1.BatchCreateContactsRequest
		err := decode([]byte(body), &m)
		var me *MemberError
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", body, err)
		case want != "" && (!errors.As(err, &me) || me.Path != want):
			t.Errorf("%s: %v, want a member error naming %s", body, err, want)
		}
	}
}
