package dbtest

import (
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
// It reads PostgreSQL's messages to the client, and when it is armed, it
// asks its condition at every ReadyForQuery that ends a transaction
// ("idle"): if the condition holds (the test looks for the committed row
// in the database), it closes both sides instead of passing the message
// on. The condition is about effects, not SQL text, so the fault hits
// whatever statements the service uses to write.
type Proxy struct {
	// URL is the target's URL with the proxy's address.
	URL string

	target string
	ln     net.Listener
	cond   atomic.Pointer[func() bool]
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

// CutWhen arms the proxy: the next transaction end after which cond holds
// loses its answer. nil disarms it.
func (p *Proxy) CutWhen(cond func() bool) {
	if cond == nil {
		p.cond.Store(nil)
		return
	}
	p.cond.Store(&cond)
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
		p.wg.Go(func() { _, _ = io.Copy(server, client); _ = server.Close() })
		p.wg.Go(func() { p.relay(server, client) })
	}
}

// relay passes the server's messages on, one at a time: a type byte, a
// length that counts itself, the body.
func (p *Proxy) relay(server, client net.Conn) {
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
		if head[0] == 'Z' && n == 1 && body[0] == 'I' {
			if cond := p.cond.Load(); cond != nil && (*cond)() {
				p.cond.CompareAndSwap(cond, nil)
				p.cuts.Add(1)
				return
			}
		}
		if _, err := client.Write(append(head[:], body...)); err != nil {
			return
		}
	}
}
