package sealed_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svat/partnerapi/internal/security/sealed"
)

func TestSealOpens(t *testing.T) {
	k1, k2 := sealed.NewKey(), sealed.NewKey()
	old, err := sealed.Parse(k1)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	ad := []byte("workspace/endpoint")
	v := old.Seal(plain, ad)
	if bytes.Contains(v, plain) || len(v) != len(plain)+sealed.Overhead {
		t.Fatalf("sealed value holds the plaintext or has %d bytes", len(v))
	}
	if v2 := old.Seal(plain, ad); bytes.Equal(v, v2) {
		t.Fatal("two seals of one plaintext are equal: the nonce is not random")
	}
	got, err := old.Open(v, ad)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// Another row's additional data, a flipped bit, or a truncation: no.
	if _, err := old.Open(v, []byte("workspace/other")); !errors.Is(err, sealed.ErrOpen) {
		t.Fatalf("opened with another row's data: %v", err)
	}
	bad := bytes.Clone(v)
	bad[len(bad)-1] ^= 1
	if _, err := old.Open(bad, ad); !errors.Is(err, sealed.ErrOpen) {
		t.Fatalf("opened a corrupted value: %v", err)
	}
	if _, err := old.Open(v[:10], ad); !errors.Is(err, sealed.ErrOpen) {
		t.Fatalf("opened a truncated value: %v", err)
	}

	// Rotation: the new key first seals, the old one still opens, and
	// Current tells the values a sweep seals again.
	rotated, err := sealed.Parse(k2 + ", " + k1)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Open(v, ad); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("the rotated ring does not open the old key's value: %q, %v", got, err)
	}
	if rotated.Current(v) || !old.Current(v) {
		t.Fatal("Current does not tell the sealing key")
	}
	nv := rotated.Seal(plain, ad)
	if !rotated.Current(nv) || !bytes.Equal(nv[1:5], rotated.KeyID()) {
		t.Fatal("a new seal is not under the first key")
	}
	if _, err := old.Open(nv, ad); !errors.Is(err, sealed.ErrOpen) {
		t.Fatal("the old ring opened the new key's value")
	}
	newOnly, _ := sealed.Parse(k2)
	if _, err := newOnly.Open(v, ad); !errors.Is(err, sealed.ErrOpen) {
		t.Fatal("a ring without the old key opened its value")
	}
}

func TestParseRefusesBadKeys(t *testing.T) {
	k := sealed.NewKey()
	for _, list := range []string{"", " , ", "c2hvcnQ=", "not base64!", k + "," + k} {
		r, err := sealed.Parse(list)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want an error", list, r)
			continue
		}
		if strings.Contains(err.Error(), k) {
			t.Errorf("the error repeats a key: %v", err)
		}
	}
	// Every base64 spelling of a key is read.
	raw := strings.TrimRight(k, "=")
	url := strings.NewReplacer("+", "-", "/", "_").Replace(raw)
	for _, s := range []string{k, raw, url} {
		if _, err := sealed.Parse(s); err != nil {
			t.Errorf("Parse(%q): %v", s, err)
		}
	}
	r, _ := sealed.Parse(k)
	if strings.Contains(r.String(), k) {
		t.Fatal("String shows the key")
	}
}

func TestLoadOrCreateKeepsTheKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data", "secret-key")
	first, err := sealed.LoadOrCreate(file)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v, %v: want mode 0600", st, err)
	}
	v := first.Seal([]byte("x"), nil)
	again, err := sealed.LoadOrCreate(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Open(v, nil); err != nil {
		t.Fatalf("the key file's key does not open what the first load sealed: %v", err)
	}
	if err := os.WriteFile(file, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sealed.LoadOrCreate(file); err == nil {
		t.Fatal("a bad key file was accepted")
	}
}
