package validate

import (
	"fmt"
	"strings"
	"testing"
)

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

// TestTextRefusesControlBidiAndInvisibleCharacters: each character that
// changes how text shows rather than what it says (a terminal escape, a
// forged line, a reordering, an invisible difference) is refused as
// invalid_format, with a message naming its code point, wherever it sits
// in the value.
func TestTextRefusesControlBidiAndInvisibleCharacters(t *testing.T) {
	t.Parallel()
	refused := []rune{0x01, 0x07, 0x08, 0x0b, 0x0c, 0x1b, 0x1f, 0x7f, 0x80, 0x85, 0x9b, 0x9f,
		0x061c, 0x200b, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e,
		0x2060, 0x2066, 0x2067, 0x2068, 0x2069, 0xfeff}
	for _, r := range refused {
		for _, in := range []string{string(r) + "Ada", "Ada" + string(r) + "Lovelace", "Zoë" + string(r) + "x", "Lovelace" + string(r)} {
			for _, lines := range []Lines{SingleLine, MultiLine} {
				msg := TextProblem(in, lines)
				if msg == "" || !strings.Contains(msg, fmt.Sprintf("U+%04X", r)) {
					t.Errorf("U+%04X in %q (multi-line %v): problem %q", r, in, lines, msg)
				}
				if !strings.ContainsRune(strings.TrimSpace(in), r) {
					continue // white space at an end is trimmed, not refused
				}
				var v Errors
				if lines == MultiLine {
					v.MultilineText("f", &in, 100)
				} else {
					v.Text("f", &in, 100)
				}
				if len(v.list) != 1 || v.list[0].Code != InvalidFormat || v.list[0].Field != "f" {
					t.Errorf("U+%04X in %q: violations %+v", r, in, v.list)
				}
			}
		}
	}
	// Tabs, line breaks and the Unicode separators: refused inside a
	// single-line field, kept in a multi-line one.
	for _, in := range []string{"a\tb", "a\nb", "a\rb", "a\r\nb", "a\u2028b", "a\u2029b"} {
		if TextProblem(in, SingleLine) == "" {
			t.Errorf("%q accepted in a single-line field", in)
		}
		if msg := TextProblem(in, MultiLine); msg != "" {
			t.Errorf("%q refused in a multi-line field: %s", in, msg)
		}
	}
	// Zero width (non-)joiners outside the writing that needs them.
	for _, in := range []string{"\u200d", "\u200dAda", "Ada\u200d", "ad\u200dmin", "ad\u200cmin", "👩\u200d", "\u200d💻",
		"👩 \u200d💻", "👩\u200d\u200d💻", "محمد\u200d ", "a\u200d👍", "\u200c", "李\u200cx"} {
		if TextProblem(in, SingleLine) == "" || TextProblem(in, MultiLine) == "" {
			t.Errorf("%q accepted", in)
		}
	}
	// NUL and invalid UTF-8 keep their own message.
	for _, in := range []string{"a\x00b", "a\xffb", "\xc3"} {
		if msg := TextProblem(in, MultiLine); msg != CleanTextMessage {
			t.Errorf("%q: problem %q, want %q", in, msg, CleanTextMessage)
		}
	}
}

// TestTextKeepsEveryScriptAndEmoji: ordinary letters of any script,
// apostrophes and hyphens, symbols and emoji, including the ZWJ emoji
// sequences and the joiners Persian and the Indic scripts write with,
// are stored as sent.
func TestTextKeepsEveryScriptAndEmoji(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"Zoë", "Zoe\u0308", "Σωκράτης", "李", "محمد", "דוד", "O'Brien", "Jean-Luc", "Ñandú & Co.", "Łódź",
		"Nguyễn Văn A", "देवनागरी", "🚀", "👩\u200d💻", "🏳\ufe0f\u200d🌈", "👨\u200d👩\u200d👧\u200d👦", "🧑🏽\u200d🚀",
		"❤\ufe0f\u200d🔥", "🐻\u200d❄\ufe0f", "🙂\u200d↔\ufe0f", "🐈\u200d⬛", "ශ්\u200dරී", "حسین\u200cزاده", "क्\u200dष",
		"£100 – €120 · ¥", "\u00a0nbsp inside\u00a0x", "\ufffd"} {
		for _, lines := range []Lines{SingleLine, MultiLine} {
			if msg := TextProblem(in, lines); msg != "" {
				t.Errorf("%q refused (multi-line %v): %s", in, lines, msg)
			}
		}
		var v Errors
		in := in
		if got := v.Text("f", &in, 100); v.Err() != nil || got == nil || *got != strings.TrimSpace(in) {
			t.Errorf("Text(%q) = %v, %v", in, got, v.Err())
		}
	}
	// Leading and trailing white space, tabs and line breaks included, is
	// trimmed rather than refused.
	in := "\t Ada \r\n"
	var v Errors
	if got := v.Text("f", &in, 100); v.Err() != nil || *got != "Ada" {
		t.Errorf("Text(%q) = %q, %v", in, *got, v.Err())
	}
	msg := "Hello,\r\n\tplease call me.\nThanks 🚀"
	if got := v.MultilineText("message", &msg, 5000); v.Err() != nil || *got != msg {
		t.Errorf("MultilineText(%q) = %q, %v", msg, *got, v.Err())
	}
}

// BenchmarkText is the check of one lead field on the ingest path: an
// ASCII value, and one in another script.
func BenchmarkText(b *testing.B) {
	for name, s := range map[string]string{
		"ascii":    "Analytical Engines Ltd, Research & Development",
		"nonascii": "Σωκράτης Παπαδόπουλος, Αναλυτικές Μηχανές",
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				var v Errors
				in := s
				if v.Text("companyName", &in, 255) == nil {
					b.Fatal("nil")
				}
			}
		})
	}
}
