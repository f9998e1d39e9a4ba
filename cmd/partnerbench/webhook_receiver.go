package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svat/partnerapi/internal/webhook/signature"
)

// hookReceiver is the webhook receiver of the webhook scenarios: every
// delivery's Standard Webhooks signature is verified over the bytes
// received (signature.Verify), as a partner's receiver does, before it is
// counted; a delivery that does not verify is answered 400 and counted
// bad. It runs in the load generator's process, on loopback.
type hookReceiver struct {
	srv  *http.Server
	base string

	mu      sync.Mutex
	secrets map[string][]signature.Secret
	// seen holds every (endpoint, webhook-id) received; counts the
	// distinct ones per endpoint.
	seen   map[string]struct{}
	counts map[string]int
	// lat are the commit-to-arrival times of the lead.created events
	// created at or after latSince.
	lat      []time.Duration
	latSince time.Time
	// sample is the body of the first delivery, what the baseline sends.
	sample []byte

	unique, total, bad atomic.Int64
	last               atomic.Int64
}

func newHookReceiver() (*hookReceiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &hookReceiver{base: "http://" + l.Addr().String(), secrets: map[string][]signature.Secret{}, seen: map[string]struct{}{}, counts: map[string]int{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

func (r *hookReceiver) close() { _ = r.srv.Close() }

// url is where an endpoint named name posts.
func (r *hookReceiver) url(name string) string { return r.base + "/hook/" + name }

// setSecret sets the secret deliveries to name are signed with.
func (r *hookReceiver) setSecret(name, secret string) error {
	s, err := signature.ParseSecret(secret)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.secrets[name] = []signature.Secret{s}
	r.mu.Unlock()
	return nil
}

// measureLatency starts recording the arrival of lead.created events
// created at or after since, minus their createdAt.
func (r *hookReceiver) measureLatency(since time.Time) {
	r.mu.Lock()
	r.lat, r.latSince = nil, since
	r.mu.Unlock()
}

// latencies returns the recorded latencies, sorted.
func (r *hookReceiver) latencies() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.lat)
	slices.Sort(out)
	return out
}

// received counts the distinct events delivered to the endpoints named.
func (r *hookReceiver) received(names ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, name := range names {
		n += r.counts[name]
	}
	return n
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	name, ok := strings.CutPrefix(req.URL.Path, "/hook/")
	if !ok || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	r.mu.Lock()
	secrets := r.secrets[name]
	r.mu.Unlock()
	h := signature.HeadersFrom(req.Header)
	if err := signature.Verify(secrets, h, body, now, 5*time.Minute); err != nil {
		r.bad.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ev struct {
		Type      string    `json:"type"`
		CreatedAt time.Time `json:"createdAt"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		r.bad.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.total.Add(1)
	key := name + " " + req.Header.Get("webhook-id")
	r.mu.Lock()
	if _, dup := r.seen[key]; !dup {
		r.seen[key] = struct{}{}
		r.counts[name]++
		r.unique.Add(1)
	}
	if r.sample == nil && name != "baseline" {
		r.sample = body
	}
	if ev.Type == "lead.created" && !r.latSince.IsZero() && !ev.CreatedAt.Before(r.latSince) {
		r.lat = append(r.lat, now.Sub(ev.CreatedAt))
	}
	r.mu.Unlock()
	r.last.Store(now.UnixNano())
	w.WriteHeader(http.StatusNoContent)
}
