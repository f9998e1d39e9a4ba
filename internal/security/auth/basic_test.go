package auth

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

func basic(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

func TestParseBasic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header, id, secret string
		ok                 bool
	}{
		{basic("cli_abc", "svcs_x-y_z"), "cli_abc", "svcs_x-y_z", true},
		{basic("a b", "c:d%e+f"), "a b", "c:d%e+f", true}, // form-urlencoded per RFC 6749 §2.3.1
		{"basic " + base64.StdEncoding.EncodeToString([]byte("id:sec")), "id", "sec", true},
		{"BASIC   " + base64.StdEncoding.EncodeToString([]byte("id:sec")), "id", "sec", true},
		{"Basic " + base64.RawStdEncoding.EncodeToString([]byte("id:se")), "id", "se", true},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("id:")), "id", "", true},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte(":sec")), "", "", false},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("nocolon")), "", "", false},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("id%zz:sec")), "", "", false},
		{"Basic !!!", "", "", false},
		{"Basic", "", "", false},
		{"Bearer abc", "", "", false},
		{"", "", "", false},
	} {
		id, sec, ok := ParseBasic(tc.header)
		if ok != tc.ok || id != tc.id || sec != tc.secret {
			t.Errorf("ParseBasic(%q) = %q, %q, %v; want %q, %q, %v", tc.header, id, sec, ok, tc.id, tc.secret, tc.ok)
		}
	}
}

// FuzzParseBasic: never panics, and whatever it accepts round-trips
// through the encoding RFC 6749 §2.3.1 prescribes.
func FuzzParseBasic(f *testing.F) {
	f.Add(basic("cli_abc", "svcs_secret"))
	f.Add(basic("a b", "c:d%e+f"))
	f.Add("Basic Og==")
	f.Add("Basic !!!")
	f.Add("basic   aWQ6c2Vj")
	f.Add("Basic " + strings.Repeat("A", 5000))
	f.Fuzz(func(t *testing.T, header string) {
		id, sec, ok := ParseBasic(header)
		if !ok {
			if id != "" || sec != "" {
				t.Fatalf("rejected header returned %q, %q", id, sec)
			}
			return
		}
		if id == "" {
			t.Fatal("accepted an empty client id")
		}
		again := basic(id, sec)
		if len(again) > len("Basic ")+4096 {
			return // re-escaping may outgrow the header bound; nothing to compare
		}
		id2, sec2, ok2 := ParseBasic(again)
		if !ok2 || id2 != id || sec2 != sec {
			t.Fatalf("round trip of %q, %q gave %q, %q, %v", id, sec, id2, sec2, ok2)
		}
	})
}
