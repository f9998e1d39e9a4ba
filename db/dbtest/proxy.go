package dbtest

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards PostgreSQL connections from a loopback TCP port to a
// cluster, and can cut a connection at the moment a transaction has
// committed but before the client hears so: the "connection lost between
// COMMIT and its answer" fault, whose outcome the client cannot know.
//
// When it is armed with a marker and a condition, a connection whose
// client has sent the marker (a value unique to the request under test,
// such as its email, which any statement writing it must carry) is cut at
// its next ReadyForQuery that ends a transaction ("idle") after which the
// condition holds (the test looks for the committed row): both sides are
// closed instead of passing the message on. Neither the marker nor the
// condition is SQL text, so the fault hits whatever statements the
// service uses to write.
type Proxy struct {
	// URL is the target's URL with the proxy's address.
	URL string

	target string
	ln     net.Listener
	arm    atomic.Pointer[trap]
	cuts   atomic.Int64
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewProxy listens on 127.0.0.1 and forwards to the unix socket of
// targetURL (a URL of this package's clusters). It stops when t ends.
func NewProxy(t testing.TB, targetURL string) *Proxy {
	t.Helper()
	u, err := url.Parse(targetURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, conns: map[net.Conn]struct{}{},
		target: filepath.Join(q.Get("host"), ".s.PGSQL."+q.Get("port"))}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	q.Set("host", host)
	q.Set("port", port)
	u.RawQuery = q.Encode()
	p.URL = u.String()
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

type trap struct {
	marker []byte
	cond   func() bool
}

// CutWhen arms the proxy: on a connection that carried marker, the next
// transaction end after which cond holds loses its answer. A nil cond
// disarms it.
func (p *Proxy) CutWhen(marker string, cond func() bool) {
	if cond == nil {
		p.arm.Store(nil)
		return
	}
	p.arm.Store(&trap{marker: []byte(marker), cond: cond})
}

// Cuts is how many connections the proxy has cut.
func (p *Proxy) Cuts() int64 { return p.cuts.Load() }

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("unix", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.track(client)
		p.track(server)
		var marked atomic.Bool
		p.wg.Go(func() { p.forward(client, server, &marked) })
		p.wg.Go(func() { p.relay(server, client, &marked) })
	}
}

// forward passes the client's bytes on, noting when they carry the armed
// marker.
func (p *Proxy) forward(client, server net.Conn, marked *atomic.Bool) {
	defer func() { _ = server.Close() }()
	buf := make([]byte, 64<<10)
	var tail []byte // the end of the previous read: a marker may straddle two
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if t := p.arm.Load(); t != nil && !marked.Load() {
				seen := append(tail, buf[:n]...)
				if bytes.Contains(seen, t.marker) {
					marked.Store(true)
				}
				tail = append(tail[:0], seen[max(0, len(seen)-len(t.marker)):]...)
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// relay passes the server's messages on, one at a time: a type byte, a
// length that counts itself, the body.
func (p *Proxy) relay(server, client net.Conn, marked *atomic.Bool) {
	defer func() { _ = client.Close(); _ = server.Close() }()
	var head [5]byte
	var body []byte
	for {
		if _, err := io.ReadFull(server, head[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 {
			return
		}
		body = append(body[:0], make([]byte, n)...)
		if _, err := io.ReadFull(server, body); err != nil {
			return
		}
		if head[0] == 'Z' && n == 1 && body[0] == 'I' && marked.Load() {
			if t := p.arm.Load(); t != nil && t.cond() && p.arm.CompareAndSwap(t, nil) {
				p.cuts.Add(1)
				return
			}
		}
		if _, err := client.Write(append(head[:], body...)); err != nil {
			return
		}
	}
}
