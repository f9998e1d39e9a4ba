package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// check is one promise checked at the end: what was checked, and every
// way it was found broken.
type check struct {
	name     string
	summary  string
	problems []string
	examples []string // in full, after the problems
}

// verify checks, through the API of the replicas still serving, that every
// write the load saw acknowledged is there: as the records are, in the
// sync walk, in the events feed and in the webhooks received.
func (u *upgrade) verify(ctx context.Context) []check {
	recs := u.load.led.snapshot()
	var events, liveLeads []string
	contacts, leads, patched, deleted, uncertain := 0, 0, 0, 0, 0
	for _, r := range recs {
		if r.kind == "contact" {
			contacts++
		} else {
			leads++
		}
		events = append(events, r.kind+".created "+r.id)
		switch {
		case r.uncertain:
			uncertain++
			continue
		case r.deleted:
			deleted++
			events = append(events, r.kind+".deleted "+r.id)
		case r.kind == "lead":
			liveLeads = append(liveLeads, r.id)
		}
		if r.patched {
			patched++
			events = append(events, r.kind+".updated "+r.id)
		}
	}
	acked := fmt.Sprintf("%d contacts and %d leads created, %d patched, %d deleted (%d with an unanswered patch or delete, not checked)",
		contacts, leads, patched, deleted, uncertain)

	if u.rot.empty() {
		return []check{u.answersCheck(), {name: "records", problems: []string{"not checked: no replica serves"}}}
	}
	hooks := check{name: "webhooks"}
	began := time.Now()
	_ = until(ctx, u.c.hookWait, func() bool { return len(u.hooks.missing(events)) == 0 })
	total, distinct := u.hooks.counts()
	hooks.summary = fmt.Sprintf("%d deliveries of %d distinct events; waited %v for the %d events of the acknowledged writes",
		total, distinct, time.Since(began).Round(time.Millisecond), len(events))
	for _, m := range u.hooks.missing(events) {
		hooks.problems = append(hooks.problems, "no delivery of "+m)
	}

	// The checks' own requests count as answers too: answersCheck last.
	later := []check{
		u.recordsCheck(recs, acked),
		u.feedCheck(ctx, u.load.sync, liveLeads, "the leads acknowledged and not deleted"),
		u.feedCheck(ctx, u.load.events, events, "the events of every acknowledged create, patch and delete"),
		hooks,
	}
	return append([]check{u.answersCheck()}, later...)
}

// answersCheck is the outcome of every request of the load.
func (u *upgrade) answersCheck() check {
	c := check{name: "answers"}
	ok, bad := u.st.totals()
	c.summary = fmt.Sprintf("%d served as they should be, %d not", ok, bad)
	// One line per kind, phase, replica and way of failing; then the
	// first failure of each way in full.
	groups := grouped(u.st.failed())
	firsts := map[string]bool{}
	for _, g := range groups {
		c.problems = append(c.problems, g.String())
	}
	for _, g := range groups {
		if len(firsts) < 8 && !firsts[g.first.kind+g.first.class] {
			firsts[g.first.kind+g.first.class] = true
			c.examples = append(c.examples, g.first.String())
		}
	}
	return c
}

// replicasCheck is whether every replica started, served and stopped
// cleanly, and the migration ran: once the last replica has stopped.
func (u *upgrade) replicasCheck() check {
	c := check{name: "replicas", problems: u.broken}
	c.summary = fmt.Sprintf("%d started, each stopped by SIGTERM after leaving the rotation", len(u.replicas))
	return c
}

// recordsCheck compares what the API lists at the end with the writes
// acknowledged.
func (u *upgrade) recordsCheck(recs []record, acked string) check {
	c := check{name: "records", summary: acked}
	contacts, err := u.listAll("/api/v1/contacts?limit=100&sort=createdAt", "contacts")
	if err != nil {
		c.problems = append(c.problems, err.Error())
		return c
	}
	leads, err := u.listAll("/api/v1/leads?limit=100&sort=createdAt", "leads")
	if err != nil {
		c.problems = append(c.problems, err.Error())
		return c
	}
	for _, r := range recs {
		if r.uncertain {
			continue
		}
		listed := contacts
		want := map[string]string{"email": r.email, "jobTitle": r.jobTitle}
		if r.kind == "lead" {
			listed = leads
			status := r.status
			if status == "" {
				status = "new"
			}
			want = map[string]string{"campaign": r.campaign, "status": status}
		}
		got, ok := listed[r.id]
		switch {
		case r.deleted && ok:
			c.problems = append(c.problems, fmt.Sprintf("%s %s (created in %s) was deleted, and is still listed", r.kind, r.id, r.phase))
		case r.deleted:
		case !ok:
			c.problems = append(c.problems, fmt.Sprintf("%s %s (created in %s) is missing", r.kind, r.id, r.phase))
		default:
			for k, w := range want {
				if g, _ := got[k].(string); g != w {
					c.problems = append(c.problems, fmt.Sprintf("%s %s (created in %s): %s is %q, acknowledged %q", r.kind, r.id, r.phase, k, g, w))
				}
			}
		}
	}
	return c
}

// listAll walks a whole list; member is the list's member in the answer.
func (u *upgrade) listAll(path, member string) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	cursor := ""
	for {
		p := path
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		x := u.load.send("list-all", u.load.tn.get(p))
		if !u.load.judge(x, http.StatusOK, "") {
			return nil, fmt.Errorf("list %s: %d %s", member, x.status, short(x.body))
		}
		var page map[string]json.RawMessage
		var items []map[string]any
		var pg pagination
		if json.Unmarshal(x.body, &page) != nil || json.Unmarshal(page[member], &items) != nil {
			return nil, fmt.Errorf("list %s: unreadable page %s", member, short(x.body))
		}
		_ = json.Unmarshal(page["pagination"], &pg)
		for _, it := range items {
			id, _ := it["id"].(string)
			out[id] = it
		}
		if pg.NextCursor == "" {
			return out, nil
		}
		cursor = pg.NextCursor
	}
}

// feedCheck walks w to its end and reports what it never saw of want. A
// change is withheld while an older transaction is open (docs/api.md,
// "Keeping a copy in sync"), so the walk goes on until it holds
// everything or a caught-up walk still misses something 20 s on.
func (u *upgrade) feedCheck(ctx context.Context, w *walker, want []string, what string) check {
	c := check{name: w.kind}
	missing := func() []string {
		var m []string
		for _, it := range want {
			if !w.saw(it) {
				m = append(m, it)
			}
		}
		return m
	}
	_ = until(ctx, 20*time.Second, func() bool { return u.load.walk(w) && len(missing()) == 0 })
	m := missing()
	c.summary = fmt.Sprintf("%d of %d: %s", len(want)-len(m), len(want), what)
	for _, it := range m {
		c.problems = append(c.problems, "never saw "+it)
	}
	return c
}
