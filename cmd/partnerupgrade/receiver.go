package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/svat/partnerapi/internal/webhook/signature"
)

// receiver is the partner's webhook receiver, in this process on
// loopback (the replicas allow 127.0.0.0/8 for it). It verifies each
// delivery's signature over the bytes received, as a partner's receiver
// does, and keeps which event types arrived for which record, whichever
// replica of whichever release sent them.
type receiver struct {
	srv *httptest.Server
	// arrived is called for every delivery: true when it verified.
	arrived func(ok bool, detail string)

	mu      sync.Mutex
	secrets []signature.Secret
	seen    map[string]bool // webhook-id: each event counted once
	events  map[string]bool // "<type> <record id>"
	total   int             // deliveries, retries of one event included
}

func newReceiver(arrived func(ok bool, detail string)) *receiver {
	h := &receiver{arrived: arrived, seen: map[string]bool{}, events: map[string]bool{}}
	h.srv = httptest.NewServer(h)
	return h
}

func (h *receiver) close() { h.srv.Close() }

func (h *receiver) url() string { return h.srv.URL + "/hook" }

// setSecret is the endpoint's signing secret, from its create answer.
func (h *receiver) setSecret(s string) error {
	sec, err := signature.ParseSecret(s)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.secrets = []signature.Secret{sec}
	h.mu.Unlock()
	return nil
}

func (h *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	secrets := h.secrets
	h.mu.Unlock()
	if err := signature.Verify(secrets, signature.HeadersFrom(req.Header), body, time.Now(), 5*time.Minute); err != nil {
		h.arrived(false, "signature: "+err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ev struct {
		Type string `json:"type"`
		Data struct {
			Object struct {
				ID string `json:"id"`
			} `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.Type == "" || ev.Data.Object.ID == "" {
		h.arrived(false, "body: "+short(body))
		http.Error(w, "unreadable event", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.total++
	if id := req.Header.Get("webhook-id"); !h.seen[id] {
		h.seen[id] = true
		h.events[ev.Type+" "+ev.Data.Object.ID] = true
	}
	h.mu.Unlock()
	h.arrived(true, "")
	w.WriteHeader(http.StatusNoContent)
}

// missing returns the wanted "<type> <record id>" that have not arrived.
func (h *receiver) missing(want []string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, w := range want {
		if !h.events[w] {
			out = append(out, w)
		}
	}
	return out
}

// counts are the deliveries received and the distinct events among them.
func (h *receiver) counts() (total, distinct int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total, len(h.seen)
}
