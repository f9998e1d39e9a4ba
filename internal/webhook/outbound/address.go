// Package outbound calls partners' webhook URLs without letting a URL, or a
// DNS answer, turn the service into a proxy into its own network (SSRF).
//
// Three checks stand between an endpoint URL and a request:
//   - ValidateURL, when an endpoint is created or changed: https only, no
//     user info, at most 2048 characters, and no host that is a refused IP
//     literal or localhost, judged after IDNA mapping as the HTTP client
//     will look it up (so "１２７.０.０.１" is 127.0.0.1); NormalizeURL
//     also returns the URL with its host as A-labels, as it is stored and
//     shown. Host names are not resolved there.
//   - The Client's dialer, on every connection it opens: the address DNS
//     gave is checked in the net.Dialer's Control hook, after resolution and
//     right before connect, so a name that resolves somewhere harmless at
//     create and to 127.0.0.1 later (DNS rebinding) is still refused.
//   - The Client itself: no proxy from the environment, no redirects, at most
//     64 KiB of a response read, one timeout over the whole attempt.
//
// An operator who runs receivers inside the cluster lists their networks in
// PARTNER_WEBHOOK_ALLOWED_NETWORKS (ParseNetworks); addresses inside them are
// allowed, over plain http too.
package outbound

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrAddressNotAllowed is in the chain of every refusal of an address: an
// IP-literal or localhost URL at ValidateURL, and a dialled address.
var ErrAddressNotAllowed = errors.New("address not allowed")

// AddressError says which address was refused and why.
type AddressError struct {
	Addr   netip.Addr
	Reason string // e.g. "loopback", "private (RFC 1918)"
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("address %s is not allowed: %s", e.Addr, e.Reason)
}

// Is makes errors.Is(err, ErrAddressNotAllowed) hold.
func (e *AddressError) Is(target error) bool { return target == ErrAddressNotAllowed }

// Networks are the CIDRs an operator trusts (PARTNER_WEBHOOK_ALLOWED_NETWORKS).
// An address inside one is allowed even when it is loopback, private or
// otherwise refused, and may be reached over plain http.
type Networks []netip.Prefix

// Contains reports whether a is inside one of the networks; an IPv4-mapped
// IPv6 address (::ffff:10.0.0.1) counts as its IPv4 address.
func (n Networks) Contains(a netip.Addr) bool {
	a = a.WithZone("")
	u := a.Unmap()
	for _, p := range n {
		if p.Contains(a) || p.Contains(u) {
			return true
		}
	}
	return false
}

// String lists the networks comma-separated, as ParseNetworks reads them.
func (n Networks) String() string {
	s := make([]string, len(n))
	for i, p := range n {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// ParseNetworks reads PARTNER_WEBHOOK_ALLOWED_NETWORKS: comma-separated
// CIDRs ("10.0.0.0/8, fd00::/8"); a bare address means just that address.
// Blank entries are skipped, so "" is no networks. Host bits are cleared
// (10.1.2.3/8 is 10.0.0.0/8). An error names the entry it could not read.
func ParseNetworks(s string) (Networks, error) {
	var n Networks
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		var p netip.Prefix
		if strings.Contains(entry, "/") {
			var err error
			if p, err = netip.ParsePrefix(entry); err != nil {
				return nil, fmt.Errorf("parse allowed network %q: want a CIDR such as 10.0.0.0/8 or fd00::/8", entry)
			}
		} else {
			a, err := netip.ParseAddr(entry)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("parse allowed network %q: want a CIDR such as 10.0.0.0/8 or fd00::/8", entry)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		n = append(n, p.Masked())
	}
	return n, nil
}

// refusedRange is one special-purpose block and why it is refused.
type refusedRange struct {
	prefix netip.Prefix
	reason string
}

// refusedV4 are the IPv4 blocks no webhook may reach unless allowed: the
// IANA IPv4 Special-Purpose Address Registry's blocks that are not globally
// reachable, plus multicast and the old class E. 0.0.0.0/8 matters: Linux
// connects 0.0.0.0 to the local host.
var refusedV4 = []refusedRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified / this network (RFC 1122)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space, CGNAT (RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local, cloud metadata (RFC 3927)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments (RFC 6890)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation TEST-NET-1 (RFC 5737)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast (RFC 7526)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (RFC 2544)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation TEST-NET-2 (RFC 5737)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation TEST-NET-3 (RFC 5737)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (RFC 1112), broadcast"},
}

// refusedV6 name the IPv6 blocks a reader of a refusal would look for. Every
// address outside 2000::/3 (global unicast) is refused too, which also
// covers the rest of ::/8, 100::/64 discard, 64:ff9b:1::/48 local NAT64,
// 5f00::/16 SRv6 and fec0::/10 site-local.
var refusedV6 = []refusedRange{
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "unique local, private (RFC 4193)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments, Teredo (RFC 2928)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation (RFC 3849)"},
	{netip.MustParsePrefix("2002::/16"), "6to4, embeds an IPv4 address (RFC 3056)"},
	{netip.MustParsePrefix("3fff::/20"), "documentation (RFC 9637)"},
}

var (
	globalUnicast = netip.MustParsePrefix("2000::/3")
	// nat64 is the well-known NAT64 prefix (RFC 6052): a translator in the
	// path connects to the IPv4 address in the last 32 bits, so that is the
	// address to check.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// CheckAddr returns nil when a may be dialled, or an *AddressError. An
// address inside allowed is always fine. An IPv4-mapped address is judged
// as its IPv4 address, a NAT64 address (64:ff9b::/96) as the IPv4 address
// it embeds; a zone (fe80::1%eth0) does not change the verdict.
func CheckAddr(a netip.Addr, allowed Networks) error {
	if !a.IsValid() {
		return &AddressError{Addr: a, Reason: "not an IP address"}
	}
	a = a.WithZone("")
	if allowed.Contains(a) {
		return nil
	}
	u := a.Unmap()
	if u.Is4() {
		if r := reasonIn(refusedV4, u); r != "" {
			return &AddressError{Addr: a, Reason: r}
		}
		return nil
	}
	if nat64.Contains(u) {
		b := u.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		if allowed.Contains(v4) {
			return nil
		}
		if r := reasonIn(refusedV4, v4); r != "" {
			return &AddressError{Addr: a, Reason: "NAT64 of " + v4.String() + ", " + r}
		}
		return nil
	}
	if r := reasonIn(refusedV6, u); r != "" {
		return &AddressError{Addr: a, Reason: r}
	}
	if !globalUnicast.Contains(u) {
		return &AddressError{Addr: a, Reason: "reserved, not global unicast (outside 2000::/3)"}
	}
	return nil
}

// reasonIn returns the reason of the most specific range holding a, or "".
func reasonIn(ranges []refusedRange, a netip.Addr) string {
	best, bits := "", -1
	for _, r := range ranges {
		if r.prefix.Contains(a) && r.prefix.Bits() > bits {
			best, bits = r.reason, r.prefix.Bits()
		}
	}
	return best
}
