package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
)

// listContacts reads the newest contacts, and the next page.
func (l *load) listContacts() { l.listTwoPages("list-contacts", "/api/v1/contacts?limit=20") }

// listLeads reads the newest leads, and the next page.
func (l *load) listLeads() { l.listTwoPages("list-leads", "/api/v1/leads?limit=20&sort=createdAt") }

// listTwoPages reads a list and follows its nextCursor once, so a cursor
// one replica signed is read by the next one in the rotation, of either
// release.
func (l *load) listTwoPages(kind, path string) {
	x := l.send(kind, l.tn.get(path))
	var p struct {
		Pagination pagination `json:"pagination"`
	}
	problem := ""
	if x.status == http.StatusOK && json.Unmarshal(x.body, &p) != nil {
		problem = "unreadable list: " + short(x.body)
	}
	if !l.judge(x, http.StatusOK, problem) || p.Pagination.NextCursor == "" {
		return
	}
	x = l.send(kind, l.tn.get(path+"&cursor="+url.QueryEscape(p.Pagination.NextCursor)))
	l.judge(x, http.StatusOK, "")
}

// walker follows a feed from its beginning, as a partner keeping a copy
// does: a sync walk of the leads (sort=updatedAt) or the events feed. Its
// cursor passes from replica to replica and from release to release; it
// keeps every item it saw, which the checks at the end compare with the
// writes acknowledged.
type walker struct {
	kind  string
	path  string
	items func(body []byte) ([]string, pagination, error)

	mu     sync.Mutex
	cursor string
	seen   map[string]bool
}

// newSyncWalker walks the leads in sync order; its items are lead ids.
func newSyncWalker() *walker {
	return &walker{kind: "sync", path: "/api/v1/leads?sort=updatedAt&limit=100", seen: map[string]bool{},
		items: func(b []byte) ([]string, pagination, error) {
			var p struct {
				Leads      []struct{ ID string } `json:"leads"`
				Pagination pagination            `json:"pagination"`
			}
			err := json.Unmarshal(b, &p)
			ids := make([]string, len(p.Leads))
			for i, le := range p.Leads {
				ids[i] = le.ID
			}
			return ids, p.Pagination, err
		}}
}

// newEventsWalker walks the events feed; its items are
// "<type> <record id>".
func newEventsWalker() *walker {
	return &walker{kind: "events", path: "/api/v1/events?limit=100", seen: map[string]bool{},
		items: func(b []byte) ([]string, pagination, error) {
			var p struct {
				Events []struct {
					Type string `json:"type"`
					Data struct {
						Object struct{ ID string } `json:"object"`
					} `json:"data"`
				} `json:"events"`
				Pagination pagination `json:"pagination"`
			}
			err := json.Unmarshal(b, &p)
			out := make([]string, len(p.Events))
			for i, e := range p.Events {
				out[i] = e.Type + " " + e.Data.Object.ID
			}
			return out, p.Pagination, err
		}}
}

// walk reads the walker's next page. It reports whether the page was the
// last one and held nothing: the walker has seen every change so far.
func (l *load) walk(w *walker) (caughtUp bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	path := w.path
	if w.cursor != "" {
		path += "&cursor=" + url.QueryEscape(w.cursor)
	}
	x := l.send(w.kind, l.tn.get(path))
	var items []string
	var p pagination
	problem := ""
	if x.status == http.StatusOK {
		var err error
		if items, p, err = w.items(x.body); err != nil {
			problem = "unreadable page: " + short(x.body)
		} else if p.NextCursor == "" && p.SyncCursor == "" {
			problem = "a last page without syncCursor: " + short(x.body)
		}
	}
	if !l.judge(x, http.StatusOK, problem) {
		return false
	}
	for _, it := range items {
		w.seen[it] = true
	}
	if p.NextCursor != "" {
		w.cursor = p.NextCursor
		return false
	}
	w.cursor = p.SyncCursor
	return len(items) == 0
}

// saw reports whether the walker has seen item.
func (w *walker) saw(item string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[item]
}
