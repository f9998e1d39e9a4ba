package outbound

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// hostProfile maps and checks a host that is not plain ASCII: UTS #46
// mapping (case, width and compatibility forms: full-width and circled
// digits become ASCII digits, "。" and "．" become "."), nontransitional,
// the STD3 ASCII rules, valid A-labels, the ContextJ rules for joiners
// and the Bidi rule (RFC 5893).
//
// It is idna.Lookup, and not idna.Registration, on purpose: Lookup is the
// profile net/http applies to a non-ASCII host before it resolves it, so
// the host ValidateURL maps is the host every attempt dials, and a host
// written in full-width digits is judged as the IP address it is (and
// refused with that address's reason). Registration maps nothing and
// refuses every mapped character, so "Bücher.example" and
// "１２７.０.０.１" would be refused as "disallowed rune" without saying
// which address was meant. What Lookup lets through that we do not want
// is refused around it: empty or over-long labels (VerifyDnsLength), hosts
// with invisible, control or bidirectional characters (which UTS #46
// would drop or refuse), and labels that mix scripts.
var hostProfile = idna.Lookup

// aceHost maps the host of u as the HTTP client will look it up and
// returns it as A-labels, with raw rewritten to carry it. No host may
// hold an invisible, control or bidirectional character (written
// percent-encoded, it is past the caller's check of the text). A host of
// plain ASCII with no A-label ("xn--"), or an IPv6 literal, is returned
// as it is, as net/http dials it: no IDNA processing, so names with "_"
// keep working. Any other host must pass hostProfile, DNS's lengths and
// the one-script rule, and is replaced in raw, lower-cased, by its
// A-labels (the rest of raw is kept byte for byte). The error is a
// *URLError with ErrURLHost whose message names the host in ASCII, so
// that it cannot read as something else either.
func aceHost(raw string, u *url.URL) (host, out string, err error) {
	host = u.Hostname()
	ascii := isASCII(host)
	// url.Parse refuses ASCII controls, written or percent-encoded, in a
	// host: only a non-ASCII one can hold such a character.
	if !ascii {
		if i := strings.IndexFunc(host, hidden); i >= 0 {
			r, _ := utf8.DecodeRuneInString(host[i:])
			return "", "", urlErr(ErrURLHost, "url host must not contain invisible, control or bidirectional characters such as %U", r)
		}
	}
	// A bracketed host is an IPv6 address (url.Parse checked it), with a
	// zone maybe: NormalizeURL judges it as an address.
	if strings.HasPrefix(u.Host, "[") || ascii && !hasACELabel(host) {
		return host, raw, nil
	}
	a, err := hostProfile.ToASCII(host)
	if err != nil {
		return "", "", urlErr(ErrURLHost, "url host %+q is not a valid host name (%s)", host, escapeNonASCII(err.Error()))
	}
	if msg := dnsLengths(a); msg != "" {
		return "", "", urlErr(ErrURLHost, "url host %s %s", a, msg)
	}
	if uni, err := hostProfile.ToUnicode(a); err == nil {
		for label := range strings.SplitSeq(uni, ".") {
			if s := mixedScripts(label); s != nil {
				return "", "", urlErr(ErrURLHost,
					"url host %s (%+q) mixes %s letters in one label, as look-alikes of other names do: write each label in one script",
					a, uni, strings.Join(s, " and "))
			}
		}
	}
	out = withHost(raw, u, a)
	if v, err := url.Parse(out); err != nil || v.Hostname() != a {
		return "", "", urlErr(ErrURLHost, "url host %+q is not a valid host name", host)
	}
	return a, out, nil
}

// withHost is raw, which u was parsed from, with its host as written (it
// may be percent-encoded) replaced by host. The authority runs from after
// "scheme://" to the first "/", "?" or "#"; u has no user info and no
// bracketed host, so the authority is the host and, after the last ":",
// the port.
func withHost(raw string, u *url.URL, host string) string {
	start := len(u.Scheme) + len("://")
	end := strings.IndexAny(raw[start:], "/?#")
	if end < 0 {
		end = len(raw) - start
	}
	end += start
	hostEnd := end
	if c := strings.LastIndexByte(raw[start:end], ':'); c >= 0 {
		hostEnd = start + c
	}
	return raw[:start] + host + raw[hostEnd:]
}

// DisplayURL is an endpoint URL as answers and pages show it: its host as
// A-labels, and every character that does not show (controls, format
// characters such as the bidirectional controls and U+200B, line and
// paragraph separators) percent-encoded, as it goes on the wire. A URL
// stored since NormalizeURL maps hosts and the API refuses those
// characters (issue 34) is shown unchanged; this is for those stored
// before, so that none reads as something else.
func DisplayURL(raw string) string {
	if isASCII(raw) {
		return raw
	}
	// The host as the HTTP client maps it, refused or not: what an
	// endpoint stored before would be looked up as, or fails as. A host
	// with characters that do not show keeps them, percent-encoded below,
	// since the mapping would drop some silently.
	if u, err := url.Parse(raw); err == nil && u.Host != "" && u.User == nil && !strings.HasPrefix(u.Host, "[") {
		host := u.Hostname()
		if !isASCII(host) && !strings.ContainsFunc(host, hidden) {
			if a, err := hostProfile.ToASCII(host); err == nil {
				raw = withHost(raw, u, a)
			}
		}
	}
	var b strings.Builder
	for _, r := range raw {
		if !hidden(r) {
			b.WriteRune(r)
			continue
		}
		var buf [utf8.UTFMax]byte
		for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
			b.WriteByte('%')
			b.WriteByte("0123456789ABCDEF"[c>>4])
			b.WriteByte("0123456789ABCDEF"[c&15])
		}
	}
	return b.String()
}

// hidden reports whether r changes how text shows rather than what it
// says: a control, a format character (bidirectional controls, zero
// width characters, the BOM, the soft hyphen), or a line or paragraph
// separator. The API refuses them in a URL as in every text field
// (validate.TextProblem); here they matter in a host, where UTS #46
// would drop some of them silently ("exa\u200Bmple.com" is looked up as
// example.com), and in what DisplayURL shows.
func hidden(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// escapeNonASCII writes the non-ASCII characters of s as \uXXXX, as %+q
// does, for a message that quotes what it refuses.
func escapeNonASCII(s string) string {
	if isASCII(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r < utf8.RuneSelf {
			b.WriteRune(r)
		} else {
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// hasACELabel reports whether a label of host starts with "xn--" in any
// case: an A-label, which must decode to a valid U-label.
func hasACELabel(host string) bool {
	for label := range strings.SplitSeq(host, ".") {
		if len(label) >= 4 && strings.EqualFold(label[:4], "xn--") {
			return true
		}
	}
	return false
}

// dnsLengths checks an A-label host against DNS (UTS #46 VerifyDnsLength,
// but for a trailing dot, the root, which is allowed): no empty label,
// none longer than 63 bytes, at most 253 bytes in all. It returns why
// not, or "".
func dnsLengths(a string) string {
	a = strings.TrimSuffix(a, ".")
	if len(a) > 253 {
		return "is longer than 253 characters"
	}
	for label := range strings.SplitSeq(a, ".") {
		switch {
		case label == "":
			return "has an empty label"
		case len(label) > 63:
			return "has a label longer than 63 characters"
		}
	}
	return ""
}

// cjk are the script sets a label may mix (UTS #39, Highly Restrictive):
// Latin with the scripts Chinese, Japanese and Korean are written in.
var cjk = [][]string{
	{"Latin", "Han", "Hiragana", "Katakana"},
	{"Latin", "Han", "Bopomofo"},
	{"Latin", "Han", "Hangul"},
}

// scriptNames are the names of unicode.Scripts but Common and Inherited
// (digits, "-", combining marks), sorted so that messages are stable.
var scriptNames = func() []string {
	var names []string
	for name := range unicode.Scripts {
		if name != "Common" && name != "Inherited" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}()

// mixedScripts returns the scripts of a U-label's letters, sorted, when
// there are two or more and they are not one of the cjk sets; nil when
// the label is fine. This is UTS #39's "Highly Restrictive" level on the
// Script property: it refuses "ехample" (Cyrillic е and х, Latin "ample")
// but not a label wholly in one script, such as "пример"; such a name is
// shown as its A-label (xn--e1afmkfd), which reads as what it is.
func mixedScripts(label string) []string {
	var found []string
	for _, r := range label {
		s := ""
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' {
				s = "Latin"
			}
		} else {
			for _, name := range scriptNames {
				if unicode.Is(unicode.Scripts[name], r) {
					s = name
					break
				}
			}
		}
		if s != "" && !slices.Contains(found, s) {
			found = append(found, s)
		}
	}
	if len(found) < 2 {
		return nil
	}
	for _, set := range cjk {
		if !slices.ContainsFunc(found, func(s string) bool { return !slices.Contains(set, s) }) {
			return nil
		}
	}
	slices.Sort(found)
	return found
}
