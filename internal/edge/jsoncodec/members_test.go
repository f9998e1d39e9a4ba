package jsoncodec

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	webhookv1 "github.com/svat/partnerapi/gen/partner/webhook/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
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

// TestWrongValuesAreNamedAsSent: a value protojson refuses for its field
// is a MemberError naming the member as sent (inside messages and list
// items, with the item's index), with the field code invalid_format and
// words for the JSON the field takes; a body refused for anything else
// (JSON that does not parse, a duplicate member, invalid UTF-8) keeps
// protojson's words, and right values pass.
func TestWrongValuesAreNamedAsSent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body          string
		msg           string // "lead", "endpoint", else a contactv1.BatchCreateContactsRequest
		path, message string
	}{
		{`{"contacts":[{"email":"a@x.co"},{"email":5}]}`, "", "contacts[1].email", "contacts[1].email: must be a string"},
		{`{"contacts":{"email":"a@x.co"}}`, "", "contacts", "contacts: must be an array"},
		{`{"contacts":["a@x.co"]}`, "", "contacts[0]", "contacts[0]: must be an object"},
		{`{"contacts":[{"email":"a@x.co","createdAt":"yesterday"}]}`, "", "contacts[0].createdAt", "contacts[0].createdAt: must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z"},
		{`{"contactId":"con_x","value":{"amount":"ten","currency":"USD"}}`, "lead", "value.amount", "value.amount: must be a whole number from -2147483648 to 2147483647"},
		{`{"contactId":"con_x","value":{"amount":3000000000,"currency":"USD"}}`, "lead", "value.amount", "value.amount: must be a whole number from -2147483648 to 2147483647"},
		{`{"contactId":"con_x","value":"10 USD"}`, "lead", "value", "value: must be an object"},
		{`{"contactId":["con_x"]}`, "lead", "contactId", "contactId: must be a string"},
		{`{"contactId":"con_x","value":{"amount":10,"currency":"USD"}}`, "lead", "", "ok"},
		{`{"url":"https://x.example","eventTypes":["lead.created",7]}`, "endpoint", "eventTypes[1]", "eventTypes[1]: must be a string"},
		{`{"url":"https://x.example","eventTypes":"lead.created"}`, "endpoint", "eventTypes", "eventTypes: must be an array"},
		// Past maxProbedItems items the list itself is named.
		{`{"url":"https://x.example","eventTypes":[` + strings.Repeat(`"",`, 150) + `7]}`, "endpoint", "eventTypes", "eventTypes: must be an array whose items are each a string"},
		// Not a type: protojson's own words, no member named.
		{`{"contactId":"con_x","value":{"amount":1,"amount":2}}`, "lead", "", `duplicate field "amount"`},
		{"{\"contactId\":\"con_\xff\"}", "lead", "", "invalid UTF-8"},
		{`{"contactId":"con_x",`, "lead", "", "the JSON ends early"},
	} {
		var m proto.Message = &contactv1.BatchCreateContactsRequest{}
		switch c.msg {
		case "lead":
			m = &leadv1.Lead{}
		case "endpoint":
			m = &webhookv1.WebhookEndpoint{}
		}
		err := decode([]byte(c.body), m)
		var me *MemberError
		switch {
		case c.path == "" && errors.As(err, &me):
			t.Errorf("%s: %v names a member", c.body, me)
		case c.path == "" && c.message == "ok" && err != nil:
			t.Errorf("%s: %v", c.body, err)
		case c.path == "" && c.message != "ok" && (err == nil || !strings.Contains(err.Error(), c.message)):
			t.Errorf("%s: %v, want an error saying %s", c.body, err, c.message)
		case c.path != "" && (!errors.As(err, &me) || me.Path != c.path || me.Code != CodeWrongType || me.Message != c.message):
			t.Errorf("%s: %#v, want %s (%s)", c.body, err, c.path, c.message)
		case c.path != "":
			if a := me.APIError(); apierror.HTTPStatus(a.Code) != 400 || len(a.Fields) != 1 || a.Fields[0].Field != c.path || a.Fields[0].Code != "invalid_format" {
				t.Errorf("%s: %+v", c.body, a)
			}
		}
	}
}
