package opaqueid

import (
	"testing"

	"github.com/google/uuid"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for range 100 {
		id := New()
		s := Format(Contact, id)
		if len(s) != len(Contact)+26 {
			t.Fatalf("Format length %d: %q", len(s), s)
		}
		got, ok := Parse(Contact, s)
		if !ok || got != id {
			t.Fatalf("Parse(%q) = %v, %v; want %v", s, got, ok, id)
		}
		if _, ok := Parse(Lead, s); ok {
			t.Fatalf("Parse accepted %q with the wrong prefix", s)
		}
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	good := Format(Lead, uuid.MustParse("0190d6b2-7f2e-7c3a-9d4b-3e2f1a0b9c8d"))
	for _, s := range []string{"", "lea_", good + "0", good[:len(good)-1], "lea_" + "UUUUUUUUUUUUUUUUUUUUUUUUUU", good[:len(good)-1] + "z"} {
		if _, ok := Parse(Lead, s); ok {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
}

func TestOrderFollowsTime(t *testing.T) {
	t.Parallel()
	a, b := Format(Contact, New()), ""
	for range 50 {
		b = Format(Contact, New())
		if b <= a {
			t.Fatalf("ids not increasing: %q then %q", a, b)
		}
		a = b
	}
}
