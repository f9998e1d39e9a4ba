package secret

import (
	"strings"
	"testing"
)

func TestNewTokenShape(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 200 {
		tok, hash := NewToken()
		if !strings.HasPrefix(tok, "svat_") || len(tok) != TokenLen {
			t.Fatalf("token %q: want svat_ prefix and length %d", tok, TokenLen)
		}
		if !WellFormedToken(tok) {
			t.Fatalf("fresh token %q fails its own checksum", tok)
		}
		if hash != HashOf(tok) {
			t.Fatal("hash is not SHA-256 of the token")
		}
		if seen[tok] {
			t.Fatal("token repeated")
		}
		seen[tok] = true
	}
}

func TestWellFormedTokenRejectsEveryOneCharacterChange(t *testing.T) {
	t.Parallel()
	tok, _ := NewToken()
	for i := len(TokenPrefix); i < len(tok); i++ {
		for _, c := range []byte{'0', 'Z', 'z'} {
			if tok[i] == c {
				continue
			}
			bad := tok[:i] + string(c) + tok[i+1:]
			if WellFormedToken(bad) {
				t.Fatalf("changed position %d (%q) still passes", i, bad)
			}
		}
	}
	for _, bad := range []string{"", "svat_", tok[:len(tok)-1], tok + "0", "SVAT_" + tok[5:], strings.Replace(tok, tok[10:11], "-", 1)} {
		if WellFormedToken(bad) {
			t.Errorf("WellFormedToken(%q) = true", bad)
		}
	}
}

func TestWellFormedTokenAllocatesNothing(t *testing.T) {
	tok, _ := NewToken()
	if n := testing.AllocsPerRun(100, func() { WellFormedToken(tok) }); n != 0 {
		t.Fatalf("WellFormedToken allocates %v times", n)
	}
}

func TestClientSecret(t *testing.T) {
	t.Parallel()
	s, h := NewClientSecret()
	if len(s) < len(SecretPrefix)+43 {
		t.Fatalf("secret %q too short", s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~", c)) {
			t.Fatalf("secret %q has a reserved character %q", s, c)
		}
	}
	if !Equal(s, h[:]) {
		t.Fatal("Equal rejects the right secret")
	}
	if Equal(s+"x", h[:]) || Equal("", h[:]) {
		t.Fatal("Equal accepts a wrong secret")
	}
}

// FuzzWellFormedToken checks that the format checker never panics and
// accepts only strings of the exact token shape whose checksum holds.
func FuzzWellFormedToken(f *testing.F) {
	tok, _ := NewToken()
	f.Add(tok)
	f.Add(tok[:len(tok)-1] + "0")
	f.Add("svat_")
	f.Add("")
	f.Add("svat_" + strings.Repeat("z", 49))
	f.Fuzz(func(t *testing.T, s string) {
		if !WellFormedToken(s) {
			return
		}
		if len(s) != TokenLen || !strings.HasPrefix(s, TokenPrefix) {
			t.Fatalf("accepted %q of the wrong shape", s)
		}
		for _, c := range s[len(TokenPrefix):] {
			if !strings.ContainsRune(alphabet, c) {
				t.Fatalf("accepted %q with a non-base62 character", s)
			}
		}
	})
}
