package ratelimit

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/svat/partnerapi/internal/records/opaqueid"
)

// Sources finds the source address of a request: the peer address, or,
// when the peer is a trusted proxy, the address that proxy saw, read from
// X-Forwarded-For right to left past every trusted proxy. A header from
// any other peer is ignored: anyone can send one.
type Sources struct {
	Trusted []netip.Prefix
}

// ParseTrusted reads PARTNER_TRUSTED_PROXIES: CIDRs or single addresses,
// separated by commas or spaces.
func ParseTrusted(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q is neither a CIDR nor an address", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

func (s Sources) trusted(a netip.Addr) bool {
	for _, p := range s.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Of returns the source key of r: an IPv4 address, or the /64 prefix of an
// IPv6 address (one host usually holds a whole /64, so counting single
// IPv6 addresses would let it rotate past the limit). "" when the peer
// address cannot be read.
func (s Sources) Of(r *http.Request) string {
	src, ok := s.Addr(r.RemoteAddr, r.Header)
	if !ok {
		return ""
	}
	return key(src)
}

// Addr returns the whole source address of a request that came from the
// peer remoteAddr ("host:port", as net/http and connect.Peer give it)
// with header: the address Of keys by, before an IPv6 one is cut to its
// /64. The audit log records it (a webhook endpoint's create). false
// when the peer address cannot be read.
func (s Sources) Addr(remoteAddr string, header http.Header) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	src := peer.Unmap()
	if len(s.Trusted) > 0 && s.trusted(src) {
		hops := strings.Split(strings.Join(header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := parseHop(strings.TrimSpace(hops[i]))
			if err != nil {
				break
			}
			src = a.Unmap()
			if !s.trusted(src) {
				break
			}
		}
	}
	return src.WithZone(""), true
}

// parseHop reads one X-Forwarded-For entry: an address, or, as some
// proxies write it, an address with a port ("192.0.2.7:4711",
// "[2001:db8::7]:4711") or a bracketed IPv6 address. Were these refused,
// every client behind such a proxy would count as the proxy itself and
// share one failure bucket.
func parseHop(h string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(h); err == nil {
		return a, nil
	}
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr(), nil
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		return netip.ParseAddr(h[1 : len(h)-1])
	}
	return netip.Addr{}, fmt.Errorf("not an address: %q", h)
}

func key(a netip.Addr) string {
	if a.Is4() {
		return a.String()
	}
	p, _ := a.WithZone("").Prefix(64)
	return p.String()
}

type sourceKey struct{}

// WithSource stores a request's source in its context, for the token
// service's failed-authentication buckets and log lines.
func WithSource(ctx context.Context, source string) context.Context {
	return context.WithValue(ctx, sourceKey{}, source)
}

// SourceFrom returns the source WithSource stored, or "".
func SourceFrom(ctx context.Context) string {
	s, _ := ctx.Value(sourceKey{}).(string)
	return s
}

// ClientKey is the client id's part of the key of its failed-authentication
// bucket at a source address: the id's UUID, or "" for a string that
// cannot be a client id (such requests count against their source address
// only, and cannot fill memory with made-up keys of any length).
func ClientKey(id string) string {
	u, ok := opaqueid.Parse(opaqueid.Client, id)
	if !ok {
		return ""
	}
	return u.String()
}
