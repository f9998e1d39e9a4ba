package outbound

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxURLLength is the longest endpoint URL ValidateURL accepts.
const MaxURLLength = 2048

// ErrInvalidURL is in the chain of every ValidateURL error, so a handler
// needs one errors.Is to answer 422; the error's text is written for the
// client ("url must use https", "url host 10.0.0.1 is not allowed: private
// (RFC 1918)"). The reason sentinels below tell the cases apart.
var ErrInvalidURL = errors.New("invalid webhook url")

// Reasons of a ValidateURL error, each also ErrInvalidURL. A refused IP
// literal or localhost is ErrAddressNotAllowed.
var (
	ErrURLMalformed = errors.New("url is not an absolute URL")
	ErrURLTooLong   = errors.New("url is too long")
	ErrURLScheme    = errors.New("url scheme not allowed")
	ErrURLUserInfo  = errors.New("url has user info")
	ErrURLHost      = errors.New("url host not valid")
)

// URLError is what ValidateURL returns: Reason is one of the sentinels
// above (or ErrAddressNotAllowed), Message is for the client.
type URLError struct {
	Reason  error
	Message string
}

func (e *URLError) Error() string { return e.Message }

// Is matches ErrInvalidURL and the reason (and what the reason matches).
func (e *URLError) Is(target error) bool {
	return target == ErrInvalidURL || errors.Is(e.Reason, target)
}

// Unwrap returns the reason.
func (e *URLError) Unwrap() error { return e.Reason }

func urlErr(reason error, format string, args ...any) error {
	return &URLError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// ValidateURL checks an endpoint URL as NormalizeURL does. The delivery
// Client runs it again before every attempt on the stored URL.
func ValidateURL(raw string, allowed Networks) error {
	_, err := NormalizeURL(raw, allowed)
	return err
}

// NormalizeURL checks an endpoint URL when it is created or changed,
// without resolving host names (the dialer checks every resolved
// address), and returns it as it is to be stored and shown: raw, with a
// host that is not plain ASCII replaced by its IDNA A-labels
// ("https://bücher.example/hook" is "https://xn--bcher-kva.example/hook").
//
//   - absolute, at most MaxURLLength characters (before and after the
//     host is mapped), a host, a port (if any) in 1..65535, no user info
//     ("https://user:pass@host" would put a credential in every log line
//     and delivery record);
//   - https. Plain http only when allowed networks are configured, and then
//     only to them: an IP-literal host must be inside one, and a host name is
//     accepted here because the dialer refuses every address of an http URL
//     that is outside them;
//   - a host that is not plain ASCII, or has an A-label, is mapped as the
//     HTTP client maps it before it resolves it (UTS #46, hostProfile) and
//     judged as mapped: "１２７.０.０.１", "①②⑦.⓪.⓪.①" and
//     "127。0。0。1" are 127.0.0.1, "ｌｏｃａｌｈｏｓｔ" is localhost. It must
//     be a valid IDNA name without invisible, control or bidirectional
//     characters, within DNS's lengths, with each label in one script
//     (aceHost);
//   - an IP-literal host must pass CheckAddr; "localhost" and "*.localhost"
//     (RFC 6761: they resolve to loopback) are refused unless loopback is
//     allowed; a host whose last label is numeric ("127.1", "0x7f.1",
//     "2130706433") is refused, since some resolvers read it as an IPv4
//     address while no DNS name ends in a number.
//
// The characters of the rest of the URL are the caller's to check (the
// API refuses in a URL what it refuses in every text field).
func NormalizeURL(raw string, allowed Networks) (string, error) {
	if len(raw) > MaxURLLength {
		return "", urlErr(ErrURLTooLong, "url is %d characters, at most %d allowed", len(raw), MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return "", urlErr(ErrURLMalformed, "url must be an absolute https URL such as https://example.com/webhooks")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", urlErr(ErrURLScheme, "url must use https, not %s", u.Scheme)
	}
	if u.User != nil {
		return "", urlErr(ErrURLUserInfo, "url must not contain user info (user:password@)")
	}
	if u.Hostname() == "" {
		return "", urlErr(ErrURLHost, "url must have a host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", urlErr(ErrURLHost, "url port %s is not in 1..65535", p)
		}
	}
	host, out, err := aceHost(raw, u)
	if err != nil {
		return "", err
	}
	if len(out) > MaxURLLength {
		return "", urlErr(ErrURLTooLong, "url is %d characters with its host as A-labels, at most %d allowed", len(out), MaxURLLength)
	}
	if err := checkHost(scheme, host, allowed); err != nil {
		return "", err
	}
	return out, nil
}

// checkHost judges a host as NormalizeURL's list says, after mapping.
func checkHost(scheme, host string, allowed Networks) error {
	if a, err := netip.ParseAddr(host); err == nil {
		if scheme == "http" && !allowed.Contains(a) {
			return urlErr(ErrURLScheme, "url must use https: http is allowed only to the allowed networks")
		}
		if err := CheckAddr(a, allowed); err != nil {
			return &URLError{Reason: err, Message: "url host " + err.Error()}
		}
		return nil
	}
	if scheme == "http" && len(allowed) == 0 {
		return urlErr(ErrURLScheme, "url must use https")
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "" || strings.ContainsAny(name, " %") {
		return urlErr(ErrURLHost, "url host %q is not a valid host name", host)
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		if allowed.Contains(netip.IPv6Loopback()) || allowed.Contains(netip.AddrFrom4([4]byte{127, 0, 0, 1})) {
			return nil
		}
		return &URLError{Reason: ErrAddressNotAllowed, Message: "url host " + host + " is not allowed: loopback"}
	}
	if numericLabel(name[strings.LastIndexByte(name, '.')+1:]) {
		return urlErr(ErrURLHost, "url host %q is not a valid host name (write an IP address in dotted or bracketed form)", host)
	}
	return nil
}

// numericLabel reports whether a label is a number in the forms the WHATWG
// URL parser reads as IPv4 parts: decimal, or 0x-prefixed hexadecimal.
func numericLabel(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		for _, c := range h {
			if !strings.ContainsRune("0123456789abcdef", c) {
				return false
			}
		}
		return true
	}
	if l == "" {
		return false
	}
	for _, c := range l {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
