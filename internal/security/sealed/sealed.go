// Package sealed encrypts the secrets the service must read back in the
// clear (webhook signing secrets: a receiver verifies an HMAC, so the
// service cannot keep only a hash, as it does for tokens and client
// secrets). A database dump, a backup or a read replica then holds no
// usable secret without the key, which lives outside the database
// (PARTNER_SECRET_KEY, or a file in the embedded server's data directory).
//
// The cipher is AES-256-GCM from the standard library: an AEAD that is
// hardware accelerated on every server CPU, needs no dependency, and with
// a random 96-bit nonce is sound for far more seals per key than a
// workspace's secrets and rotations will ever make (NIST SP 800-38D
// §8.3: 2^32). Each value is bound to its row by additional data (the
// caller's: the workspace and endpoint), so a sealed secret copied into
// another row does not open there.
//
// A Keyring holds several keys so that the key can be rotated: the first
// seals, every one opens, and Current tells which values a sweep must
// seal again under the first key before an old one is removed.
package sealed

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	// KeySize is the length of a key: AES-256.
	KeySize = 32
	// version is the first byte of every sealed value, so that another
	// format could be told apart later.
	version   = 1
	idSize    = 4
	nonceSize = 12
	// Overhead is what sealing adds to a plaintext: the version, the key
	// id, the nonce and GCM's tag.
	Overhead = 1 + idSize + nonceSize + 16
)

// ErrOpen is returned for a value no key of the ring opens: a key removed
// too early, a value from another row, or a corrupted one.
var ErrOpen = errors.New("sealed value does not open with any key")

type key struct {
	id   [idSize]byte
	aead cipher.AEAD
}

// Keyring seals with its first key and opens with any of its keys. It is
// safe for concurrent use.
type Keyring struct {
	keys []key
}

// Parse reads a comma-separated list of keys, each the base64 (standard
// or URL alphabet, padded or not) of 32 random bytes; the first seals. The
// error never repeats a key.
func Parse(list string) (*Keyring, error) {
	var r Keyring
	for i, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		raw, err := decodeKey(part)
		if err != nil || len(raw) != KeySize {
			return nil, fmt.Errorf("key %d of the list: want the base64 of %d random bytes (e.g. `openssl rand -base64 32`)", i+1, KeySize)
		}
		k, err := newKey(raw)
		if err != nil {
			return nil, err
		}
		for _, o := range r.keys {
			if o.id == k.id {
				return nil, fmt.Errorf("key %d of the list: listed twice", i+1)
			}
		}
		r.keys = append(r.keys, k)
	}
	if len(r.keys) == 0 {
		return nil, errors.New("no key: want a comma-separated list of base64 keys of 32 bytes, the one that seals first")
	}
	return &r, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

func newKey(raw []byte) (key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, fmt.Errorf("make cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, fmt.Errorf("make cipher: %w", err)
	}
	// The id names the key in each value, so that Open tries one key and
	// a sweep can find values under an old one; a hash of the key, not
	// the key, and too short to help guess it.
	sum := sha256.Sum256(append([]byte("partnerapi sealed key id\x00"), raw...))
	var k key
	copy(k.id[:], sum[:idSize])
	k.aead = aead
	return k, nil
}

// NewKey returns a fresh key in the form Parse reads.
func NewKey() string {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b) // crypto/rand never fails (Go 1.24)
	return base64.StdEncoding.EncodeToString(b)
}

// Seal encrypts plain under the first key, bound to ad.
func (r *Keyring) Seal(plain, ad []byte) []byte {
	k := r.keys[0]
	out := make([]byte, 1+idSize+nonceSize, Overhead+len(plain))
	out[0] = version
	copy(out[1:], k.id[:])
	nonce := out[1+idSize:]
	_, _ = rand.Read(nonce)
	return k.aead.Seal(out, nonce, plain, ad)
}

// Open decrypts a value Seal made with any key of the ring, bound to the
// same ad.
func (r *Keyring) Open(value, ad []byte) ([]byte, error) {
	if len(value) < Overhead || value[0] != version {
		return nil, ErrOpen
	}
	for _, k := range r.keys {
		if [idSize]byte(value[1:1+idSize]) != k.id {
			continue
		}
		plain, err := k.aead.Open(nil, value[1+idSize:1+idSize+nonceSize], value[1+idSize+nonceSize:], ad)
		if err != nil {
			return nil, ErrOpen
		}
		return plain, nil
	}
	return nil, ErrOpen
}

// Current reports whether value is sealed under the ring's first key:
// what a sweep leaves alone.
func (r *Keyring) Current(value []byte) bool {
	return len(value) >= Overhead && value[0] == version && [idSize]byte(value[1:1+idSize]) == r.keys[0].id
}

// KeyID is the first key's id as it stands in every value it seals (bytes
// 2 to 5), so that a query can find the values under older keys.
func (r *Keyring) KeyID() []byte {
	return append([]byte(nil), r.keys[0].id[:]...)
}

// Keys is how many keys the ring holds.
func (r *Keyring) Keys() int { return len(r.keys) }

// String never shows a key.
func (r *Keyring) String() string { return fmt.Sprintf("sealed.Keyring(%d keys)", len(r.keys)) }

// LoadOrCreate reads the key list in file, or, when there is no file yet,
// writes a fresh key there (mode 0600, in a directory only its owner can
// read) and returns it: the embedded server's default, kept with its
// data, so that a developer's server needs no setting and still seals.
func LoadOrCreate(file string) (*Keyring, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, fmt.Errorf("create key directory: %w", err)
		}
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return LoadOrCreate(file) // another process made it first
		}
		if err != nil {
			return nil, fmt.Errorf("create key file: %w", err)
		}
		k := NewKey()
		if _, err := f.WriteString(k + "\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("write key file: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("write key file: %w", err)
		}
		return Parse(k)
	}
	if err != nil {
		return nil, fmt.Errorf("read key file: %w", err)
	}
	r, err := Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", file, err)
	}
	return r, nil
}
