package validate

import "testing"

func TestFormats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fn   func(string) bool
		ok   []string
		bad  []string
	}{
		{"email", ValidEmail,
			[]string{"a@b.co", "first.last+tag@sub.example.com", "x_y-z@a-b.io"},
			[]string{"", "a", "a@b", "@b.co", "a@.co", "a@b..co", ".a@b.co", "a.@b.co", "a..b@c.co", "a@-b.co", "a b@c.co", "a@b@c.co"}},
		{"e164", ValidE164,
			[]string{"+14155550123", "+442071838750", "+12"},
			[]string{"", "+", "+1", "14155550123", "+0123", "+1 415", "+1234567890123456"}},
		{"slug", ValidSlug,
			[]string{"web_form", "facebook_ads", "zapier", "a-b", "q4"},
			[]string{"", "Web", "web form", "_a", "a_", "a__b", "a-_b"}},
		{"currency", ValidCurrency,
			[]string{"USD", "EUR", "JPY", "XXX"},
			[]string{"", "usd", "US", "USDD", "ABC", "D A"}},
	} {
		for _, s := range tc.ok {
			if !tc.fn(s) {
				t.Errorf("%s: %q refused", tc.name, s)
			}
		}
		for _, s := range tc.bad {
			if tc.fn(s) {
				t.Errorf("%s: %q accepted", tc.name, s)
			}
		}
	}
}

func TestTextTrimsAndCountsCharacters(t *testing.T) {
	t.Parallel()
	var v Errors
	in := "  été  "
	if got := v.Text("f", &in, 3); got == nil || *got != "été" || v.Err() != nil {
		t.Fatalf("Text = %v, %v", got, v.Err())
	}
	blank := "   "
	if got := v.Text("f", &blank, 3); got != nil {
		t.Fatalf("blank text kept: %q", *got)
	}
	long := "abcd"
	v.Text("f", &long, 3)
	if v.Err() == nil {
		t.Fatal("over-long text accepted")
	}
}

// TestEmailLowerCasesASCIIOnly: an address is lower-cased letter by ASCII
// letter; a non-ASCII letter that strings.ToLower would turn into an
// ASCII one (the Kelvin sign) is refused, not stored as another address.
func TestEmailLowerCasesASCIIOnly(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{" Ada.King@Example.COM ": "ada.king@example.com", "\u212a@x.co": "", "k\u0130@x.co": ""} {
		var v Errors
		got := v.Email("email", &in)
		if want == "" {
			if v.Err() == nil {
				t.Errorf("%q accepted as %q", in, *got)
			}
			continue
		}
		if v.Err() != nil || got == nil || *got != want {
			t.Errorf("%q: %v, %v; want %q", in, got, v.Err(), want)
		}
	}
}
