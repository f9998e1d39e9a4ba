package jsoncodec

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	identityv1 "github.com/svat/partnerapi/gen/partner/identity/v1"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	problemv1 "github.com/svat/partnerapi/gen/partner/problem/v1"
	tokenv1 "github.com/svat/partnerapi/gen/partner/token/v1"
)

// appendFastJSON renders the hot response messages without reflection,
// byte for byte as marshalJSON (protojson with EmitDefaultValues) renders
// them in compact form; TestFastJSONMatchesProtojson holds it to that.
// protojson walks every message by reflection and was a third of the CPU
// of a page of contacts. ok is false for any other message, or for input
// protojson would refuse (invalid UTF-8), which then goes the slow way.
func appendFastJSON(b []byte, msg proto.Message) (out []byte, ok bool) {
	w := fastWriter{b: b, ok: true}
	switch m := msg.(type) {
	case *identityv1.GetMeResponse:
		w.me(m)
	case *contactv1.ListContactsResponse:
		w.raw(`{"contacts":[`)
		for i, c := range m.GetContacts() {
			if i > 0 {
				w.raw(",")
			}
			w.contact(c)
		}
		w.raw("]")
		if p := m.GetPagination(); p != nil {
			w.pagination(p.NextCursor, p.SyncCursor)
		}
		w.raw("}")
	case *contactv1.Contact:
		w.contact(m)
	case *leadv1.Lead:
		w.lead(m)
	case *contactv1.CreateContactResponse:
		w.raw("{")
		if m.GetContact() != nil {
			w.raw(`"contact":`)
			w.contact(m.GetContact())
		}
		w.raw("}")
	case *leadv1.ListLeadsResponse:
		w.raw(`{"leads":[`)
		for i, l := range m.GetLeads() {
			if i > 0 {
				w.raw(",")
			}
			w.lead(l)
		}
		w.raw("]")
		if p := m.GetPagination(); p != nil {
			w.pagination(p.NextCursor, p.SyncCursor)
		}
		w.raw("}")
	case *leadv1.CreateLeadResponse:
		w.raw("{")
		if m.GetLead() != nil {
			w.raw(`"lead":`)
			w.lead(m.GetLead())
		}
		w.raw("}")
	case *contactv1.GetContactResponse:
		w.single("contact", m.GetContact() != nil, func() { w.contact(m.GetContact()) })
	case *contactv1.UpdateContactResponse:
		w.single("contact", m.GetContact() != nil, func() { w.contact(m.GetContact()) })
	case *leadv1.GetLeadResponse:
		w.single("lead", m.GetLead() != nil, func() { w.lead(m.GetLead()) })
	case *leadv1.UpdateLeadResponse:
		w.single("lead", m.GetLead() != nil, func() { w.lead(m.GetLead()) })
	case *contactv1.BatchCreateContactsResponse:
		w.raw(`{"results":[`)
		for i, r := range m.GetResults() {
			if i > 0 {
				w.raw(",")
			}
			switch {
			case r.GetContact() != nil:
				w.raw(`{"contact":`)
				w.contact(r.GetContact())
				w.raw("}")
			case r.GetError() != nil:
				w.raw(`{"error":`)
				w.problem(r.GetError())
				w.raw("}")
			default:
				w.raw("{}")
			}
		}
		w.raw("]}")
	case *leadv1.BatchCreateLeadsResponse:
		w.raw(`{"results":[`)
		for i, r := range m.GetResults() {
			if i > 0 {
				w.raw(",")
			}
			switch {
			case r.GetLead() != nil:
				w.raw(`{"lead":`)
				w.lead(r.GetLead())
				w.raw("}")
			case r.GetError() != nil:
				w.raw(`{"error":`)
				w.problem(r.GetError())
				w.raw("}")
			default:
				w.raw("{}")
			}
		}
		w.raw("]}")
	case *tokenv1.CreateTokenResponse:
		w.raw(`{"access_token":`)
		w.str(m.GetAccessToken())
		w.raw(`,"token_type":`)
		w.str(m.GetTokenType())
		w.raw(`,"expires_in":`)
		w.b = strconv.AppendInt(w.b, int64(m.GetExpiresIn()), 10)
		w.raw(`,"scope":`)
		w.str(m.GetScope())
		w.raw("}")
	default:
		return b, false
	}
	if !w.ok {
		return b, false
	}
	return w.b, true
}

type fastWriter struct {
	b  []byte
	ok bool
	// n counts members written in the current object, for commas.
	n []int
}

func (w *fastWriter) raw(s string) { w.b = append(w.b, s...) }

func (w *fastWriter) open() {
	w.raw("{")
	w.n = append(w.n, 0)
}

func (w *fastWriter) close() {
	w.raw("}")
	w.n = w.n[:len(w.n)-1]
}

func (w *fastWriter) key(k string) {
	if w.n[len(w.n)-1] > 0 {
		w.raw(",")
	}
	w.n[len(w.n)-1]++
	w.raw(`"`)
	w.raw(k)
	w.raw(`":`)
}

func (w *fastWriter) field(k, v string) {
	w.key(k)
	w.str(v)
}

func (w *fastWriter) opt(k string, v *string) {
	if v != nil {
		w.field(k, *v)
	}
}

func (w *fastWriter) ts(k string, t *timestamppb.Timestamp) {
	if t == nil {
		return
	}
	if !t.IsValid() {
		w.ok = false
		return
	}
	w.key(k)
	w.raw(`"`)
	w.b = appendTimestamp(w.b, t.GetSeconds(), t.GetNanos())
	w.raw(`"`)
}

// appendTimestamp appends a valid timestamp (years 1 to 9999) as protojson
// writes it: RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits. It does
// the calendar arithmetic itself (days to civil date, H. Hinnant's
// algorithm): time.Time.AppendFormat was a tenth of the CPU of a page of
// contacts.
func appendTimestamp(b []byte, secs int64, nanos int32) []byte {
	days, rem := secs/86400, secs%86400
	if rem < 0 {
		rem += 86400
		days--
	}
	z := days + 719468
	era := z / 146097
	if z < 0 {
		era = (z - 146096) / 146097
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if mp >= 10 {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	b = appendDigits(b, y, 4)
	b = append(b, '-')
	b = appendDigits(b, m, 2)
	b = append(b, '-')
	b = appendDigits(b, d, 2)
	b = append(b, 'T')
	b = appendDigits(b, rem/3600, 2)
	b = append(b, ':')
	b = appendDigits(b, rem/60%60, 2)
	b = append(b, ':')
	b = appendDigits(b, rem%60, 2)
	if nanos != 0 {
		b = append(b, '.')
		switch {
		case nanos%1_000_000 == 0:
			b = appendDigits(b, int64(nanos/1_000_000), 3)
		case nanos%1_000 == 0:
			b = appendDigits(b, int64(nanos/1_000), 6)
		default:
			b = appendDigits(b, int64(nanos), 9)
		}
	}
	return append(b, 'Z')
}

// appendDigits appends v, zero-padded to width digits.
func appendDigits(b []byte, v int64, width int) []byte {
	var buf [20]byte
	i := len(buf)
	for range width {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, buf[i:]...)
}

// str appends a JSON string escaped exactly as protojson does: only '"',
// '\\' and control characters.
func (w *fastWriter) str(s string) {
	if !utf8.ValidString(s) {
		w.ok = false
		return
	}
	w.b = append(w.b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= ' ' && c != '"' && c != '\\' {
			continue
		}
		w.b = append(w.b, s[start:i]...)
		w.b = append(w.b, '\\')
		switch c {
		case '"', '\\':
			w.b = append(w.b, c)
		case '\b':
			w.b = append(w.b, 'b')
		case '\f':
			w.b = append(w.b, 'f')
		case '\n':
			w.b = append(w.b, 'n')
		case '\r':
			w.b = append(w.b, 'r')
		case '\t':
			w.b = append(w.b, 't')
		default:
			w.b = append(w.b, 'u', '0', '0', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		}
		start = i + 1
	}
	w.b = append(w.b, s[start:]...)
	w.b = append(w.b, '"')
}

// single writes a response that holds one record under name.
func (w *fastWriter) single(name string, set bool, record func()) {
	w.raw("{")
	if set {
		w.raw(`"` + name + `":`)
		record()
	}
	w.raw("}")
}

// problem writes an RFC 9457 problem object of a batch result.
func (w *fastWriter) problem(p *problemv1.Problem) {
	w.open()
	w.field("type", p.GetType())
	w.field("title", p.GetTitle())
	w.key("status")
	w.b = strconv.AppendInt(w.b, int64(p.GetStatus()), 10)
	w.field("detail", p.GetDetail())
	w.field("code", p.GetCode())
	w.field("requestId", p.GetRequestId())
	w.opt("existingId", p.ExistingId)
	w.key("errors")
	w.raw("[")
	for i, f := range p.GetErrors() {
		if i > 0 {
			w.raw(",")
		}
		w.open()
		w.field("field", f.GetField())
		w.field("code", f.GetCode())
		w.field("message", f.GetMessage())
		w.close()
	}
	w.raw("]")
	if p.LeadCount != nil {
		w.key("leadCount")
		w.b = strconv.AppendInt(w.b, int64(p.GetLeadCount()), 10)
	}
	if p.RecordCount != nil {
		w.key("recordCount")
		w.b = strconv.AppendInt(w.b, int64(p.GetRecordCount()), 10)
	}
	w.close()
}

// pagination writes the envelope member of a list page.
func (w *fastWriter) pagination(next, sync *string) {
	w.raw(`,"pagination":`)
	w.open()
	w.opt("nextCursor", next)
	w.opt("syncCursor", sync)
	w.close()
}

func (w *fastWriter) me(m *identityv1.GetMeResponse) {
	w.open()
	if ws := m.GetWorkspace(); ws != nil {
		w.key("workspace")
		w.open()
		w.field("id", ws.GetId())
		w.field("name", ws.GetName())
		w.close()
	}
	if app := m.GetApp(); app != nil {
		w.key("app")
		w.open()
		w.field("clientId", app.GetClientId())
		w.field("name", app.GetName())
		w.close()
	}
	w.key("scopes")
	w.raw("[")
	for i, s := range m.GetScopes() {
		if i > 0 {
			w.raw(",")
		}
		w.str(s)
	}
	w.raw("]")
	w.ts("tokenExpiresAt", m.GetTokenExpiresAt())
	w.close()
}

func (w *fastWriter) contact(c *contactv1.Contact) {
	w.open()
	w.field("id", c.GetId())
	w.opt("email", c.Email)
	w.opt("phone", c.Phone)
	w.opt("firstName", c.FirstName)
	w.opt("lastName", c.LastName)
	w.opt("companyName", c.CompanyName)
	w.opt("jobTitle", c.JobTitle)
	w.opt("externalId", c.ExternalId)
	w.ts("createdAt", c.GetCreatedAt())
	w.ts("updatedAt", c.GetUpdatedAt())
	w.values("customFields", c.GetCustomFields())
	w.close()
}

func (w *fastWriter) lead(l *leadv1.Lead) {
	if l.GetContact() != nil {
		w.ok = false // input-only; never in a response
		return
	}
	w.open()
	w.field("id", l.GetId())
	w.field("contactId", l.GetContactId())
	w.opt("title", l.Title)
	w.opt("status", l.Status)
	w.opt("source", l.Source)
	w.opt("campaign", l.Campaign)
	w.opt("message", l.Message)
	if v := l.GetValue(); v != nil {
		w.key("value")
		w.open()
		w.key("amount")
		w.b = strconv.AppendInt(w.b, int64(v.GetAmount()), 10)
		w.field("currency", v.GetCurrency())
		w.close()
	}
	w.opt("externalId", l.ExternalId)
	w.ts("createdAt", l.GetCreatedAt())
	w.ts("updatedAt", l.GetUpdatedAt())
	w.values("customFields", l.GetCustomFields())
	w.close()
}

// values writes a map of JSON values as protojson does: keys sorted,
// left out when empty.
func (w *fastWriter) values(k string, m map[string]*structpb.Value) {
	if len(m) == 0 {
		return
	}
	keys := make([]string, 0, len(m))
	for key := range m {
		if !plainKey(key) {
			w.ok = false // needs escaping: the slow way
			return
		}
		keys = append(keys, key)
	}
	slices.Sort(keys)
	w.key(k)
	w.open()
	for _, key := range keys {
		w.key(key)
		w.value(m[key])
	}
	w.close()
}

// value writes one JSON value: a struct (never a custom value) goes the
// slow way.
func (w *fastWriter) value(v *structpb.Value) {
	switch x := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		w.raw("null")
	case *structpb.Value_BoolValue:
		w.b = strconv.AppendBool(w.b, x.BoolValue)
	case *structpb.Value_StringValue:
		w.str(x.StringValue)
	case *structpb.Value_NumberValue:
		f := x.NumberValue
		if math.IsNaN(f) || math.IsInf(f, 0) {
			w.ok = false
			return
		}
		w.b = appendNumber(w.b, f)
	case *structpb.Value_ListValue:
		w.raw("[")
		for i, it := range x.ListValue.GetValues() {
			if i > 0 {
				w.raw(",")
			}
			w.value(it)
		}
		w.raw("]")
	default:
		w.ok = false
	}
}

// appendNumber spells f as protojson (and encoding/json) do.
func appendNumber(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// plainKey reports whether k needs no escaping in JSON (a custom field's
// key always does).
func plainKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return k != ""
}
