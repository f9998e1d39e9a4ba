package jsoncodec

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	identityv1 "github.com/svat/partnerapi/gen/partner/identity/v1"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
)

var samples = []string{"", "a", "Ada Lovelace", `quote " and \ backslash`, "tab\tnew\nline\r\x00\x01\x1f\x7f", "é✓ 東京 \u2028 \U0001F600", "<script>&amp;</script>"}

// fill sets every field of m, walking its descriptor, each with
// probability 3/4 (so absent optional fields are exercised too). A field
// added to a proto later is filled without this test changing, so a fast
// encoder that forgets it fails the comparison with protojson.
func fill(r *rand.Rand, m protoreflect.Message, depth int) {
	if m.Descriptor().FullName() == "google.protobuf.Timestamp" {
		nanos := []int64{0, 123_000_000, 123_456_000, 123_456_789, 1, 999_999_999, 500_000_000}[r.IntN(7)]
		fields := m.Descriptor().Fields()
		m.Set(fields.ByName("seconds"), protoreflect.ValueOfInt64(r.Int64N(4102444800)))
		m.Set(fields.ByName("nanos"), protoreflect.ValueOfInt32(int32(nanos)))
		return
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if r.IntN(4) == 0 {
			continue
		}
		switch {
		case f.IsMap():
			mp := m.Mutable(f).Map()
			for range r.IntN(3) {
				mp.Set(scalar(r, f.MapKey()).MapKey(), value(r, mp.NewValue, f.MapValue(), depth))
			}
		case f.IsList():
			l := m.Mutable(f).List()
			for range r.IntN(4) {
				l.Append(value(r, l.NewElement, f, depth))
			}
		case f.Message() != nil:
			if depth < 4 {
				fill(r, m.Mutable(f).Message(), depth+1)
			}
		default:
			m.Set(f, scalar(r, f))
		}
	}
}

func value(r *rand.Rand, newValue func() protoreflect.Value, f protoreflect.FieldDescriptor, depth int) protoreflect.Value {
	if f.Message() == nil {
		return scalar(r, f)
	}
	v := newValue()
	if depth < 4 {
		fill(r, v.Message(), depth+1)
	}
	return v
}

func scalar(r *rand.Rand, f protoreflect.FieldDescriptor) protoreflect.Value {
	switch f.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(samples[r.IntN(len(samples))])
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(r.Int32() - r.Int32())
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(r.Int64() - r.Int64())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(r.Uint32())
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(r.Uint64())
	case protoreflect.EnumKind:
		vals := f.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(r.IntN(vals.Len())).Number())
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(samples[r.IntN(len(samples))]))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(r.Float64())
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(r.Float32())
	}
	panic("unhandled kind " + f.Kind().String())
}

// fastTypes lists every message type of ours the fast encoder renders,
// found by asking it about every registered partner.* message, so a
// message added to the fast path is tested without this list changing.
func fastTypes(t *testing.T) []protoreflect.MessageType {
	var out []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if strings.HasPrefix(string(mt.Descriptor().FullName()), "partner.") {
			if _, ok := appendFastJSON(nil, mt.New().Interface()); ok {
				out = append(out, mt)
			}
		}
		return true
	})
	if len(out) < 8 {
		t.Fatalf("the fast encoder renders %d message types; expected at least the 8 hot ones", len(out))
	}
	return out
}

// TestFastJSONMatchesProtojson: for random, fully walked messages of every
// type the fast path renders, its output is byte for byte protojson's,
// compacted. The fast path may refuse a message (input-only fields,
// invalid UTF-8), which then goes to protojson; it must not refuse most.
func TestFastJSONMatchesProtojson(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 11))
	for _, mt := range fastTypes(t) {
		accepted := 0
		const n = 400
		for i := range n {
			m := mt.New()
			fill(r, m, 0)
			fast, ok := appendFastJSON(nil, m.Interface())
			if !ok {
				continue
			}
			accepted++
			slow, err := marshalJSON.Marshal(m.Interface())
			if err != nil {
				t.Fatal(err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, slow); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fast, noEmptyValues(compact.Bytes())) {
				t.Fatalf("%s #%d differs:\nfast:      %s\nprotojson: %s", mt.Descriptor().FullName(), i, fast, compact.Bytes())
			}
		}
		if accepted < n/10 {
			t.Errorf("%s: the fast path took only %d of %d random messages", mt.Descriptor().FullName(), accepted, n)
		}
	}
}

// TestFillReachesEveryField guards the walker itself: a filled Lead sets
// every one of its fields in some sample.
func TestFillReachesEveryField(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[protoreflect.Name]bool{}
	fields := (&leadv1.Lead{}).ProtoReflect().Descriptor().Fields()
	for range 100 {
		m := (&leadv1.Lead{}).ProtoReflect()
		fill(r, m, 0)
		m.Range(func(f protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			seen[f.Name()] = true
			return true
		})
	}
	if len(seen) != fields.Len() {
		t.Fatalf("fill set %d of %d Lead fields: %v", len(seen), fields.Len(), seen)
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

// TestAppendTimestampMatchesProtojson: the hand-written RFC 3339 writer
// agrees with protojson's over the whole valid range, fractions of each
// width included.
func TestAppendTimestampMatchesProtojson(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	lo, hi := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
	secs := []int64{lo, hi, 0, -1, 86399, 86400, 951782400 /* 2000-02-29 */, 4107542400 /* 2100-03-01 */}
	for range 20000 {
		secs = append(secs, lo+r.Int64N(hi-lo+1))
	}
	for i, s := range secs {
		nanos := []int32{0, 123_000_000, 123_456_000, 123_456_789, 999_999_999, 1}[i%6]
		ts := &timestamppb.Timestamp{Seconds: s, Nanos: nanos}
		want, err := protojson.Marshal(ts)
		if err != nil {
			t.Fatal(err)
		}
		got := `"` + string(appendTimestamp(nil, s, nanos)) + `"`
		if got != string(want) {
			t.Fatalf("%d.%09d: got %s, protojson %s", s, nanos, got, want)
		}
	}
}

// BenchmarkEncodeContactPage is the JSON of a page of 100 contacts, as the
// REST gateway writes it (the encoder alone, no I/O).
func BenchmarkEncodeContactPage(b *testing.B) {
	page := &contactv1.ListContactsResponse{Pagination: &contactv1.Pagination{}}
	at := timestamppb.New(time.Date(2026, 11, 22, 9, 30, 15, 123456000, time.UTC))
	for i := range 100 {
		email, first, last, company := "seed-"+strconv.Itoa(i)+"@bench.test", "Ada", "Lovelace", "Analytical Engines Ltd"
		page.Contacts = append(page.Contacts, &contactv1.Contact{Id: "con_06h03v5hwxrxq2y8zvaw85bnsc", Email: &email,
			FirstName: &first, LastName: &last, CompanyName: &company, CreatedAt: at, UpdatedAt: at})
	}
	next := "AQAGYNeHVOFPAaIB7WWaeUSCGnzzxR3FOy0q8Wsim_75nWNl5_EC4oE"
	page.Pagination.NextCursor = &next
	buf := make([]byte, 0, 32<<10)
	b.ReportAllocs()
	for b.Loop() {
		out, err := AppendREST(buf[:0], page)
		if err != nil || len(out) < 100*100 {
			b.Fatal(err, len(out))
		}
	}
}

// FuzzFastJSONString: any string in any string field (every rune, stray
// bytes, invalid UTF-8) is escaped byte for byte as protojson escapes it,
// or left to protojson when protojson refuses it too. The seed corpus
// runs with the tests; the random strings below cover every plane.
func FuzzFastJSONString(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range samples {
		f.Add(s)
	}
	for range 2000 {
		var b []byte
		for range r.IntN(8) {
			switch r.IntN(4) {
			case 0:
				b = append(b, byte(r.IntN(256)))
			case 1:
				b = append(b, byte(r.IntN(0x80)))
			default:
				b = utf8.AppendRune(b, rune(r.IntN(0x110000)))
			}
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := &contactv1.GetContactResponse{Contact: &contactv1.Contact{Id: s, Email: &s}}
		fast, ok := appendFastJSON(nil, m)
		slow, err := marshalJSON.Marshal(m)
		if !ok {
			if err == nil {
				t.Fatalf("fast path refused %q, which protojson renders", s)
			}
			return
		}
		if err != nil {
			t.Fatalf("fast path rendered %q, which protojson refuses: %v", s, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, slow); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fast, noEmptyValues(compact.Bytes())) {
			t.Fatalf("%q:\nfast:      %s\nprotojson: %s", s, fast, compact.Bytes())
		}
	})
}

// noEmptyValues is protojson's rendering without the empty customFields
// EmitDefaultValues writes: the contract leaves customFields out of a
// record that holds none (product.md, "Custom fields"), and the fast path
// does.
func noEmptyValues(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte(`,"customFields":{}`), nil)
}
