package jsoncodec

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	identityv1 "github.com/svat/partnerapi/gen/partner/identity/v1"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	problemv1 "github.com/svat/partnerapi/gen/partner/problem/v1"
	tokenv1 "github.com/svat/partnerapi/gen/partner/token/v1"
)

var samples = []string{"", "a", "Ada Lovelace", `quote " and \ backslash`, "tab\tnew\nline\r\x00\x01\x1f\x7f", "é✓ 東京 \u2028 \U0001F600", "<script>&amp;</script>"}

func rs(r *rand.Rand) string { return samples[r.IntN(len(samples))] }

func ro(r *rand.Rand) *string {
	if r.IntN(3) == 0 {
		return nil
	}
	s := rs(r)
	return &s
}

func rts(r *rand.Rand) *timestamppb.Timestamp {
	if r.IntN(4) == 0 {
		return nil
	}
	nanos := []int32{0, 123_000_000, 123_456_000, 123_456_789, 1, 999_999_999, 500_000_000}[r.IntN(7)]
	return &timestamppb.Timestamp{Seconds: r.Int64N(4102444800), Nanos: nanos}
}

func randomContact(r *rand.Rand) *contactv1.Contact {
	return &contactv1.Contact{Id: rs(r), Email: ro(r), Phone: ro(r), FirstName: ro(r), LastName: ro(r), CompanyName: ro(r),
		JobTitle: ro(r), ExternalId: ro(r), CreatedAt: rts(r), UpdatedAt: rts(r)}
}

func randomLead(r *rand.Rand) *leadv1.Lead {
	l := &leadv1.Lead{Id: rs(r), ContactId: rs(r), Title: ro(r), Status: ro(r), Source: ro(r), Campaign: ro(r), Message: ro(r),
		ExternalId: ro(r), CreatedAt: rts(r), UpdatedAt: rts(r)}
	if r.IntN(2) == 0 {
		l.Value = &leadv1.Money{Amount: r.Int32N(1 << 30), Currency: rs(r)}
	}
	return l
}

func randomProblem(r *rand.Rand) *problemv1.Problem {
	p := &problemv1.Problem{Type: rs(r), Title: rs(r), Status: r.Int32N(600), Detail: rs(r), Code: rs(r), RequestId: rs(r), ExistingId: ro(r)}
	for range r.IntN(3) {
		p.Errors = append(p.Errors, &problemv1.FieldViolation{Field: rs(r), Code: rs(r), Message: rs(r)})
	}
	return p
}

func maybe[T any](r *rand.Rand, f func(*rand.Rand) *T) *T {
	if r.IntN(5) == 0 {
		return nil
	}
	return f(r)
}

func randomPagination(r *rand.Rand) (*contactv1.Pagination, *leadv1.Pagination) {
	if r.IntN(4) == 0 {
		return nil, nil
	}
	c, sc := ro(r), ro(r)
	return &contactv1.Pagination{NextCursor: c, SyncCursor: sc}, &leadv1.Pagination{NextCursor: c, SyncCursor: sc}
}

// TestFastJSONMatchesProtojson: for random messages of every type the fast
// path handles, its output is byte for byte protojson's, compacted.
func TestFastJSONMatchesProtojson(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 11))
	for i := range 3000 {
		var m proto.Message
		switch i % 13 {
		case 0:
			me := &identityv1.GetMeResponse{TokenExpiresAt: rts(r)}
			if r.IntN(3) > 0 {
				me.Workspace = &identityv1.Workspace{Id: rs(r), Name: rs(r)}
			}
			if r.IntN(3) > 0 {
				me.App = &identityv1.App{ClientId: rs(r), Name: rs(r)}
			}
			for range r.IntN(4) {
				me.Scopes = append(me.Scopes, rs(r))
			}
			m = me
		case 1:
			l := &contactv1.ListContactsResponse{}
			for range r.IntN(4) {
				l.Contacts = append(l.Contacts, randomContact(r))
			}
			l.Pagination, _ = randomPagination(r)
			m = l
		case 2:
			l := &leadv1.ListLeadsResponse{}
			for range r.IntN(4) {
				l.Leads = append(l.Leads, randomLead(r))
			}
			_, l.Pagination = randomPagination(r)
			m = l
		case 3:
			m = &contactv1.CreateContactResponse{Contact: randomContact(r)}
		case 4:
			m = &leadv1.CreateLeadResponse{Lead: randomLead(r)}
		case 5:
			m = &tokenv1.CreateTokenResponse{AccessToken: rs(r), TokenType: rs(r), ExpiresIn: r.Int32(), Scope: rs(r)}
		case 6:
			m = &contactv1.GetContactResponse{Contact: maybe(r, randomContact)}
		case 7:
			m = &contactv1.UpdateContactResponse{Contact: maybe(r, randomContact)}
		case 8:
			m = &leadv1.GetLeadResponse{Lead: maybe(r, randomLead)}
		case 9:
			m = &leadv1.UpdateLeadResponse{Lead: maybe(r, randomLead)}
		case 10:
			b := &contactv1.BatchCreateContactsResponse{}
			for range r.IntN(5) {
				res := &contactv1.BatchCreateContactsResult{}
				switch r.IntN(3) {
				case 0:
					res.Result = &contactv1.BatchCreateContactsResult_Contact{Contact: randomContact(r)}
				case 1:
					res.Result = &contactv1.BatchCreateContactsResult_Error{Error: randomProblem(r)}
				}
				b.Results = append(b.Results, res)
			}
			m = b
		case 11:
			b := &leadv1.BatchCreateLeadsResponse{}
			for range r.IntN(5) {
				res := &leadv1.BatchCreateLeadsResult{}
				switch r.IntN(3) {
				case 0:
					res.Result = &leadv1.BatchCreateLeadsResult_Lead{Lead: randomLead(r)}
				case 1:
					res.Result = &leadv1.BatchCreateLeadsResult_Error{Error: randomProblem(r)}
				}
				b.Results = append(b.Results, res)
			}
			m = b
		case 12:
			m = &contactv1.CreateContactResponse{}
		}
		fast, ok := appendFastJSON(nil, m)
		if !ok {
			t.Fatalf("fast path refused %v", m)
		}
		slow, err := marshalJSON.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, slow); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fast, compact.Bytes()) {
			t.Fatalf("message %d differs:\nfast:      %s\nprotojson: %s", i, fast, compact.Bytes())
		}
	}
}

func TestFastJSONFallsBack(t *testing.T) {
	t.Parallel()
	bad := "\xff"
	for _, m := range []proto.Message{
		&contactv1.CreateContactResponse{Contact: &contactv1.Contact{Email: &bad}},
		&leadv1.CreateLeadResponse{Lead: &leadv1.Lead{Contact: &leadv1.LeadContact{}}},
		&identityv1.GetMeRequest{},
	} {
		if _, ok := appendFastJSON(nil, m); ok {
			t.Errorf("fast path took %T it must leave to protojson", m)
		}
	}
}
