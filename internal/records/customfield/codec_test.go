package customfield

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// TestFastCodecIsEncodingJSON: encodeFast writes what encoding/json
// writes, and decodeFast reads what encoding/json (UseNumber) reads, for
// every value shape the checks store, escapes and odd text included; what
// it does not take, it leaves to encoding/json.
func TestFastCodecIsEncodingJSON(t *testing.T) {
	cases := []Values{
		{},
		{"a": "plain", "b": json.Number("25000"), "c": true, "d": false, "e": []string{"x", "y"}},
		{"q": "quote \" back \\ slash / tab\t nl\n cr\r bs\b ff\f ctl\x01 <html> & \u2028\u2029 é 😀"},
		{"n": json.Number("-1.5e+10"), "m": json.Number("0.000001"), "z": json.Number("0")},
		{"empty": "", "list": []string{}, "one": []string{"only"}},
		{"bad_utf8": "a\xffb"},
		{"k with space": "v", "ü": "key"},
	}
	for _, vals := range cases {
		want, err := json.Marshal(map[string]any(vals))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := encodeFast(vals); !ok || !bytes.Equal(got, want) {
			t.Errorf("encodeFast(%v) = %s, %v; encoding/json writes %s", vals, got, ok, want)
		}
		// Decoding: what encoding/json gives, from its bytes and from
		// PostgreSQL's jsonb text (spaces after the separators).
		for _, in := range [][]byte{want, bytes.ReplaceAll(bytes.ReplaceAll(want, []byte(`":`), []byte(`": `)), []byte(`,"`), []byte(`, "`))} {
			var ref Values
			d := json.NewDecoder(bytes.NewReader(in))
			d.UseNumber()
			if err := d.Decode(&ref); err != nil {
				t.Fatal(err)
			}
			got, err := Decode(in)
			if err != nil || !reflect.DeepEqual(got, ref) {
				t.Errorf("Decode(%s) = %#v, %v; encoding/json reads %#v", in, got, err, ref)
			}
		}
	}
	// Shapes it leaves to encoding/json, read the same.
	for _, in := range []string{`{"a":null}`, `{"a":{"b":1}}`, `{"a":[1,2]}`, `{"a":"\u00e9\ud83d\ude00"}`, `  {"a" : "b"}  `} {
		var ref Values
		d := json.NewDecoder(bytes.NewReader([]byte(in)))
		d.UseNumber()
		if err := d.Decode(&ref); err != nil {
			t.Fatal(err)
		}
		got, err := Decode([]byte(in))
		if err != nil || !reflect.DeepEqual(got, ref) {
			t.Errorf("Decode(%s) = %#v, %v; encoding/json reads %#v", in, got, err, ref)
		}
	}
	for _, in := range []string{`{"a":}`, `{"a":"b"`, `["a"]`, `{"a":"b"} x`, `{"a":tru}`, `{"a":--1}`} {
		if _, ok := decodeFast([]byte(in)); ok {
			t.Errorf("decodeFast took %s", in)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	in := []byte(`{"budget": 25000, "call_at": "2026-12-01T09:30:00Z", "channels": ["phone", "email"], "interest": "crm", "newsletter": true, "notes": "Wants a demo next week, prefers mornings", "start_date": "2027-01-15", "team_size": "11-50", "website": "https://example.com/pricing", "billing_email": "billing@example.com"}`)
	for b.Loop() {
		if _, err := Decode(in); err != nil {
			b.Fatal(err)
		}
	}
}
