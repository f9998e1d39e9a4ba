// Package secret makes and checks credentials: access tokens and client
// secrets. Both are at least 256 bits from crypto/rand, so a single SHA-256
// is a sound way to store them (NIST SP 800-63B §5.1.1.2 requires a slow
// KDF only for low-entropy, human-chosen secrets); see docs/security.md.
//
// Access token: "svat_" + 43 base62 characters of 32 random bytes + a
// 6-character base62 CRC32 of those 43 characters. The checksum lets the
// server refuse a mistyped or made-up token without a database lookup, and
// lets secret scanners recognise a real token.
package secret

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"hash/crc32"
	"math/big"
)

// TokenPrefix starts every access token.
const TokenPrefix = "svat_"

// SecretPrefix starts every client secret.
const SecretPrefix = "svcs_"

const (
	alphabet    = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	randomLen   = 43 // base62 digits of 256 bits
	checksumLen = 6  // base62 digits of 32 bits
	// TokenLen is the length of every access token.
	TokenLen = len(TokenPrefix) + randomLen + checksumLen
)

// Hash is a SHA-256 digest of a credential.
type Hash = [sha256.Size]byte

// NewToken returns a fresh access token and its hash.
func NewToken() (token string, hash Hash) {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand contract since Go 1.24)
	b := make([]byte, 0, TokenLen)
	b = append(b, TokenPrefix...)
	b = appendBase62(b, new(big.Int).SetBytes(raw[:]), randomLen)
	sum := crc32.ChecksumIEEE(b[len(TokenPrefix):])
	b = appendBase62(b, new(big.Int).SetUint64(uint64(sum)), checksumLen)
	token = string(b)
	return token, HashOf(token)
}

// WellFormedToken reports whether s has the shape and checksum of an access
// token. It allocates nothing and touches no database.
func WellFormedToken(s string) bool {
	if len(s) != TokenLen || s[:len(TokenPrefix)] != TokenPrefix {
		return false
	}
	for i := len(TokenPrefix); i < len(s); i++ {
		if digit(s[i]) < 0 {
			return false
		}
	}
	body := s[len(TokenPrefix) : len(TokenPrefix)+randomLen]
	var want uint64
	for i := len(TokenPrefix) + randomLen; i < len(s); i++ {
		want = want*62 + uint64(digit(s[i]))
	}
	return want <= 0xFFFFFFFF && crcString(body) == uint32(want)
}

// NewClientSecret returns a fresh client secret (32 random bytes, base64url:
// only URL-unreserved characters) and its hash.
func NewClientSecret() (secret string, hash Hash) {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	secret = SecretPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	return secret, HashOf(secret)
}

// HashOf hashes a credential for storage and lookup.
func HashOf(credential string) Hash { return sha256.Sum256([]byte(credential)) }

// Equal compares a presented credential with a stored hash in constant
// time.
func Equal(presented string, stored []byte) bool {
	h := HashOf(presented)
	return subtle.ConstantTimeCompare(h[:], stored) == 1
}

// crcString is crc32.ChecksumIEEE of a string without converting it to a
// byte slice, which would allocate on the request path.
func crcString(s string) uint32 {
	crc := ^uint32(0)
	for i := 0; i < len(s); i++ {
		crc = crc32.IEEETable[byte(crc)^s[i]] ^ (crc >> 8)
	}
	return ^crc
}

func appendBase62(b []byte, n *big.Int, width int) []byte {
	digits := make([]byte, width)
	base, rem := big.NewInt(62), new(big.Int)
	for i := width - 1; i >= 0; i-- {
		n.QuoRem(n, base, rem)
		digits[i] = alphabet[rem.Int64()]
	}
	return append(b, digits...)
}

func digit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 36
	}
	return -1
}
