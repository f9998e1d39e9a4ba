package restgw

import (
	"net/url"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	tokenv1 "github.com/svat/partnerapi/gen/partner/token/v1"
)

// decode is DecodeOAuthBody into a token request, as a map of the
// parameters it set.
func decode(ct, body string) (map[string]string, error) {
	msg := &tokenv1.CreateTokenRequest{}
	if err := DecodeOAuthBody(ct, []byte(body), msg.ProtoReflect()); err != nil {
		return nil, err
	}
	out := map[string]string{}
	msg.ProtoReflect().Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		out[string(f.Name())] = v.String()
		return true
	})
	return out, nil
}

func TestDecodeOAuthBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ct, body string
		want     map[string]string
		err      bool
	}{
		{"application/x-www-form-urlencoded", "grant_type=client_credentials&scope=a+b", map[string]string{"grant_type": "client_credentials", "scope": "a b"}, false},
		{"application/x-www-form-urlencoded; charset=UTF-8", "grant_type=x&scope=", map[string]string{"grant_type": "x"}, false},
		{"application/x-www-form-urlencoded", "grant_type=x&extra=1", map[string]string{"grant_type": "x"}, false},
		{"application/x-www-form-urlencoded", "grant_type=x&grant_type=x", nil, true},
		{"application/x-www-form-urlencoded", "grant_type=%zz", nil, true},
		{"application/json", `{"grant_type":"x","scope":"a"}`, map[string]string{"grant_type": "x", "scope": "a"}, false},
		{"application/json; charset=utf-8", `{"grant_type":"x","other":{"nested":true}}`, nil, true},
		{"application/json", `{"grant_type":"x","grant_type":"y"}`, nil, true},
		{"application/json", `{"grant_type":"x"} {}`, nil, true},
		{"application/json", `["grant_type"]`, nil, true},
		{"application/json", `{"grant_type":1}`, nil, true},
		// null is "not sent", as an empty value is (RFC 6749 §3.1).
		{"application/json", `{"grant_type":"x","scope":null}`, map[string]string{"grant_type": "x"}, false},
		{"application/json", `{"grant_type":"x","scope":null,"scope":"a"}`, nil, true},
		{"application/json", ``, nil, true},
		{"text/plain", "grant_type=x", nil, true},
		{"application/x-www-form-urlencoded; charset=iso-8859-1", "grant_type=x", nil, true},
		{"", "", map[string]string{}, false},
		{"", "grant_type=x", nil, true},
		// Invalid UTF-8 reads as in JSON: each bad byte is U+FFFD.
		{"application/x-www-form-urlencoded", "grant_type=x&scope=%FF%FEa", map[string]string{"grant_type": "x", "scope": "\uFFFD\uFFFDa"}, false},
		{"application/json", "{\"grant_type\":\"x\",\"scope\":\"\xff\xfea\"}", map[string]string{"grant_type": "x", "scope": "\uFFFD\uFFFDa"}, false},
	} {
		got, err := decode(tc.ct, tc.body)
		if (err != nil) != tc.err {
			t.Errorf("%q %q: err = %v, want error %v", tc.ct, tc.body, err, tc.err)
			continue
		}
		if !tc.err && !equal(got, tc.want) {
			t.Errorf("%q %q = %v, want %v", tc.ct, tc.body, got, tc.want)
		}
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// FuzzDecodeOAuthBody: never panics; an accepted body sets only
// non-empty parameters; a form body with a repeated parameter is refused.
func FuzzDecodeOAuthBody(f *testing.F) {
	for _, ct := range []string{"application/x-www-form-urlencoded", "application/json", "application/json; charset=utf-8", ""} {
		f.Add(ct, "grant_type=client_credentials&scope=a+b")
		f.Add(ct, `{"grant_type":"client_credentials","client_id":"x"}`)
		f.Add(ct, `{"grant_type":"a","grant_type":"b"}`)
		f.Add(ct, "scope=a&scope=b")
	}
	f.Fuzz(func(t *testing.T, ct, body string) {
		got, err := decode(ct, body)
		if err != nil {
			return
		}
		for k, v := range got {
			if v == "" {
				t.Fatalf("accepted parameter %q=%q", k, v)
			}
		}
		if strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
			vals, perr := url.ParseQuery(body)
			for k, v := range vals {
				if perr == nil && len(v) > 1 {
					t.Fatalf("accepted repeated %q in %q", k, body)
				}
			}
		}
	})
}
