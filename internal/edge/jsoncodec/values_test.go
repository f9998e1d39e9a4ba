package jsoncodec

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
)

// valueBodies are bodies with custom values that decodeValues reads
// (read: true) or leaves to protojson.
var valueBodies = []struct {
	name string
	body string
	read bool
}{
	{"only", `{"customFields":{"a":1}}`, true},
	{"first", `{"customFields":{"a":1},"source":"web"}`, true},
	{"middle", `{"source":"web", "customFields" : {"a":"x"} ,"title":"T"}`, true},
	{"last", `{"source":"web","title":"T","customFields":{"a":true}}`, true},
	{"spaces", "{\n  \"customFields\" : {\n \"a\" : [ 1 , \"b\" , null , false ] } ,\n  \"source\" : \"web\"\n}\n", true},
	{"empty", `{"customFields":{},"source":"web"}`, true},
	{"every JSON type", `{"customFields":{"n":-1.5e3,"z":0,"e":1E2,"big":12345678901234567890,"s":"x\n\"\\\/\u00e9 é 😀","t":true,"f":false,"null":null,"l":[],"o":{"k":{"k2":[1,{"x":"y"}]}}}}`, true},
	{"inline contact", `{"contact":{"email":"a@b.co","customFields":{"tier":"gold"}},"customFields":{"a":1}}`, true},
	{"inline contact only", `{"contact":{"customFields":{"tier":"gold"}}}`, true},
	{"value and others", `{"value":{"amount":100,"currency":"USD"},"customFields":{"a":1},"contact":{"email":"a@b.co"}}`, true},
	{"null", `{"customFields":null,"source":"web"}`, false},
	{"array", `{"customFields":[1],"source":"web"}`, false},
	{"string", `{"customFields":"x"}`, false},
	{"duplicate member", `{"customFields":{"a":1},"customFields":{"b":2}}`, false},
	{"duplicate key", `{"customFields":{"a":1,"a":2}}`, false},
	{"duplicate nested key", `{"customFields":{"a":{"k":1,"k":2}}}`, false},
	{"proto name", `{"custom_fields":{"a":1}}`, false},
	{"proto name elsewhere", `{"customFields":{"a":1},"external_id":"x"}`, false},
	{"unknown member", `{"customFields":{"a":1},"bogus":1}`, false},
	{"leading zero", `{"customFields":{"a":01}}`, false},
	{"bare point", `{"customFields":{"a":1.}}`, false},
	{"point first", `{"customFields":{"a":.5}}`, false},
	{"plus", `{"customFields":{"a":+1}}`, false},
	{"out of range", `{"customFields":{"a":1e400}}`, false},
	{"NaN", `{"customFields":{"a":NaN}}`, false},
	{"number then letter", `{"customFields":{"a":1x}}`, false},
	{"lone surrogate", `{"customFields":{"a":"\ud800"}}`, false},
	{"surrogate pair", `{"customFields":{"a":"\ud83d\ude00"}}`, false},
	{"bad escape", `{"customFields":{"a":"\q"}}`, false},
	{"control character", "{\"customFields\":{\"a\":\"x\ty\"}}", false},
	{"invalid UTF-8", "{\"customFields\":{\"a\":\"\xff\"}}", false},
	{"trailing comma in values", `{"customFields":{"a":1,}}`, false},
	{"trailing comma after", `{"customFields":{"a":1},}`, false},
	{"trailing comma, cut first", `{"customFields":{"a":1}, }`, false},
	{"missing colon", `{"customFields" {"a":1}}`, false},
	{"unterminated", `{"customFields":{"a":"x`, false},
	{"trailing data", `{"customFields":{"a":1}} x`, false},
	{"bad literal", `{"customFields":{"a":tru}}`, false},
	{"bad literal elsewhere", `{"customFields":{"a":1},"title":nul}`, false},
	{"no values", `{"source":"web"}`, false},
}

// TestDecodeValuesMatchesProtojson: whatever decodeValues reads, it reads
// into the same message as protojson; what it does not read is left to
// protojson, which refuses exactly the bodies decodeValues cannot read
// here, but the ones protojson takes with null, a proto name or no values.
func TestDecodeValuesMatchesProtojson(t *testing.T) {
	for _, c := range valueBodies {
		t.Run(c.name, func(t *testing.T) {
			checkValueBody(t, []byte(c.body), &leadv1.Lead{}, &leadv1.Lead{}, c.read)
		})
	}
	batch := `{"leads":[{"source":"a","customFields":{"x":1}},{"customFields":{"y":"z"},"source":"b"},{"source":"c"},{"customFields":{}}]}`
	checkValueBody(t, []byte(batch), &leadv1.BatchCreateLeadsRequest{}, &leadv1.BatchCreateLeadsRequest{}, true)
	contact := `{"email":"a@b.co","customFields":{"tier":"gold","seats":12}}`
	checkValueBody(t, []byte(contact), &contactv1.Contact{}, &contactv1.Contact{}, true)
}

func checkValueBody(t *testing.T, b []byte, fast, slow proto.Message, wantRead bool) {
	t.Helper()
	read := decodeValues(b, fast)
	if read != wantRead {
		t.Fatalf("decodeValues(%s) = %v, want %v", b, read, wantRead)
	}
	err := protojson.Unmarshal(b, slow)
	if !read {
		return
	}
	if err != nil {
		t.Fatalf("read %s, which protojson refuses: %v", b, err)
	}
	if !proto.Equal(fast, slow) {
		t.Fatalf("%s:\n read     %v\n protojson %v", b, fast, slow)
	}
}

// FuzzDecodeValues holds decodeValues to protojson on any body: it reads
// only bodies protojson takes, into the same message.
func FuzzDecodeValues(f *testing.F) {
	for _, c := range valueBodies {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, slow leadv1.Lead
		if !decodeValues(b, &fast) {
			return
		}
		if err := protojson.Unmarshal(b, &slow); err != nil {
			t.Fatalf("read %q, which protojson refuses: %v", b, err)
		}
		if !proto.Equal(&fast, &slow) {
			t.Fatalf("%q:\n read     %v\n protojson %v", b, &fast, &slow)
		}
	})
}
