package outbound

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// testDNS is a tiny authoritative DNS server over UDP on 127.0.0.1: it
// answers A and AAAA queries for the names it holds, and NXDOMAIN for the
// rest. Its answers can change between lookups, as a rebinding attacker's do.
type testDNS struct {
	conn net.PacketConn
	mu   sync.Mutex
	recs map[string][]netip.Addr // lower-case name without the final dot
	hits map[string]int
}

func newTestDNS(t *testing.T) *testDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &testDNS{conn: pc, recs: map[string][]netip.Addr{}, hits: map[string]int{}}
	t.Cleanup(func() { _ = pc.Close() })
	go d.serve()
	return d
}

// set makes name resolve to addrs from the next lookup on.
func (d *testDNS) set(name string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.recs[name] = nil
	for _, a := range addrs {
		d.recs[name] = append(d.recs[name], netip.MustParseAddr(a))
	}
}

// lookups reports how many questions were asked about name.
func (d *testDNS) lookups(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hits[name]
}

// resolver returns a pure-Go resolver that asks only this server.
func (d *testDNS) resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "udp", d.conn.LocalAddr().String())
		},
	}
}

func (d *testDNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := d.answer(buf[:n]); resp != nil {
			_, _ = d.conn.WriteTo(resp, from)
		}
	}
}

// answer builds the response to one query (RFC 1035 §4.1), or nil to drop it.
func (d *testDNS) answer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	// The question: labels up to a zero byte, then type and class.
	i := 12
	var labels []string
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if l&0xC0 != 0 || i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	end := i + 5
	qtype := binary.BigEndian.Uint16(q[i+1 : i+3])
	name := strings.ToLower(strings.Join(labels, "."))

	d.mu.Lock()
	addrs, known := d.recs[name]
	d.hits[name]++
	d.mu.Unlock()

	flags := uint16(0x8180 | 0x0400) // response, RD, RA, AA
	if !known {
		flags |= 3 // NXDOMAIN
	}
	var answers [][]byte
	for _, a := range addrs {
		var rtype uint16
		switch {
		case qtype == 1 && a.Is4():
			rtype = 1
		case qtype == 28 && a.Is6():
			rtype = 28
		default:
			continue
		}
		rr := []byte{0xC0, 12} // pointer to the question's name
		rr = binary.BigEndian.AppendUint16(rr, rtype)
		rr = binary.BigEndian.AppendUint16(rr, 1) // IN
		rr = binary.BigEndian.AppendUint32(rr, 0) // TTL 0: never cached
		rr = binary.BigEndian.AppendUint16(rr, uint16(a.BitLen()/8))
		rr = append(rr, a.AsSlice()...)
		answers = append(answers, rr)
	}
	resp := append([]byte{}, q[:2]...) // id
	resp = binary.BigEndian.AppendUint16(resp, flags)
	resp = binary.BigEndian.AppendUint16(resp, 1)
	resp = binary.BigEndian.AppendUint16(resp, uint16(len(answers)))
	resp = append(resp, 0, 0, 0, 0) // no authority, no additional
	resp = append(resp, q[12:end]...)
	for _, rr := range answers {
		resp = append(resp, rr...)
	}
	return resp
}
