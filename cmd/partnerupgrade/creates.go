package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"time"
)

// token requests a token and makes it the one the load uses.
func (l *load) token() {
	x := l.send("token", l.tn.tokenCall())
	var tok, problem string
	if x.status == http.StatusOK {
		var err error
		if tok, err = accessToken(x.body); err != nil {
			problem = err.Error()
		}
	}
	if l.judge(x, http.StatusOK, problem) {
		l.tn.token.Store(&tok)
	}
}

// createContact creates a contact with an Idempotency-Key.
func (l *load) createContact() {
	n := l.seq.Add(1)
	email := fmt.Sprintf("c-%d@upgrade.test", n)
	body := map[string]any{"email": email, "firstName": "Up", "lastName": fmt.Sprint("C", n)}
	x := l.send("contact", l.tn.jsonCall(http.MethodPost, "/api/v1/contacts", body, fmt.Sprintf("c-%d", n)))
	id, problem := created(x, "email", email)
	if l.judge(x, http.StatusCreated, problem) {
		l.led.created(&record{kind: "contact", id: id, email: email, phase: x.phase})
	}
}

// leadBody is a lead with an inline contact of its own.
func leadBody(n int64) map[string]any {
	return map[string]any{
		"contact":  map[string]any{"email": fmt.Sprintf("l-%d@upgrade.test", n), "firstName": "Lead", "lastName": fmt.Sprint("L", n)},
		"source":   "web_form",
		"campaign": fmt.Sprintf("l-%d", n),
		"message":  "rolling upgrade",
		"value":    map[string]any{"amount": n, "currency": "EUR"},
	}
}

// createLead creates a lead with an inline contact and an
// Idempotency-Key; one in four is kept for replays.
func (l *load) createLead() {
	n := l.seq.Add(1)
	body, key := leadBody(n), fmt.Sprintf("l-%d", n)
	x := l.send("lead", l.tn.jsonCall(http.MethodPost, "/api/v1/leads", body, key))
	id, problem := created(x, "campaign", body["campaign"])
	if l.judge(x, http.StatusCreated, problem) {
		rec := &record{kind: "lead", id: id, campaign: body["campaign"].(string), phase: x.phase}
		if n%4 == 0 {
			rec.replay = &replayable{key: key, path: "/api/v1/leads", body: body, answer: x.body}
		}
		l.led.created(rec)
	}
}

// createLeadGroup sends n keyed lead creates at once to one replica,
// which commits concurrent creates together (internal/work/groupcommit).
func (l *load) createLeadGroup(n int) {
	ph := l.phaseName()
	r, release, err := l.rot.acquire()
	if err != nil {
		l.judge(exchange{answer: answer{body: []byte(err.Error())}, at: time.Now(), phase: ph, kind: "lead-grouped", replica: "-"}, http.StatusCreated, "")
		return
	}
	defer release()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			k := l.seq.Add(1)
			body := leadBody(k)
			x := l.sendTo(r, ph, "lead-grouped", l.tn.jsonCall(http.MethodPost, "/api/v1/leads", body, fmt.Sprintf("g-%d", k)))
			id, problem := created(x, "campaign", body["campaign"])
			if l.judge(x, http.StatusCreated, problem) {
				l.led.created(&record{kind: "lead", id: id, campaign: body["campaign"].(string), phase: x.phase})
			}
		})
	}
	wg.Wait()
}

// createLeadBatch sends a keyed batch of five leads with inline contacts.
func (l *load) createLeadBatch() {
	n := l.seq.Add(5)
	items := make([]map[string]any, 5)
	for i := range items {
		items[i] = leadBody(n - 4 + int64(i))
	}
	x := l.send("lead-batch", l.tn.jsonCall(http.MethodPost, "/api/v1/leads/batch", map[string]any{"leads": items}, fmt.Sprintf("b-%d", n)))
	var res struct {
		Results []struct {
			Lead  *struct{ ID, Campaign string } `json:"lead"`
			Error json.RawMessage                `json:"error"`
		} `json:"results"`
	}
	problem := ""
	if x.status == http.StatusOK {
		if err := json.Unmarshal(x.body, &res); err != nil || len(res.Results) != len(items) {
			problem = "unreadable batch answer: " + short(x.body)
		}
		for i, r := range res.Results {
			switch {
			case r.Lead == nil || r.Lead.ID == "":
				problem = fmt.Sprintf("item %d: %s", i, short(r.Error))
			case r.Lead.Campaign != items[i]["campaign"]:
				problem = fmt.Sprintf("item %d: campaign %q, sent %q", i, r.Lead.Campaign, items[i]["campaign"])
			}
		}
	}
	if l.judge(x, http.StatusOK, problem) {
		for i, r := range res.Results {
			l.led.created(&record{kind: "lead", id: r.Lead.ID, campaign: items[i]["campaign"].(string), phase: x.phase})
		}
	}
}

// replayLead sends a keyed lead create again, whichever release answered
// it first: the answer must be the first one, replayed.
func (l *load) replayLead() {
	rec := l.led.replayPick()
	if rec == nil {
		return
	}
	rp := rec.replay
	x := l.send("lead-replay", l.tn.jsonCall(http.MethodPost, rp.path, rp.body, rp.key))
	problem := ""
	if x.status == http.StatusCreated {
		var first, again any
		_ = json.Unmarshal(rp.answer, &first)
		_ = json.Unmarshal(x.body, &again)
		switch {
		case !x.replayed:
			problem = "not Idempotent-Replayed: " + short(x.body)
		case !reflect.DeepEqual(first, again):
			problem = fmt.Sprintf("replayed %s; first answer (%s) was %s", short(x.body), rec.phase, short(rp.answer))
		}
	}
	l.judge(x, http.StatusCreated, problem)
}

// created reads a create's answer: the new id, and a problem when the
// answer lacks it or does not hold what was sent in field.
func created(x exchange, field string, sent any) (string, string) {
	if x.status != http.StatusCreated {
		return "", ""
	}
	var v map[string]any
	if err := json.Unmarshal(x.body, &v); err != nil {
		return "", "unreadable answer: " + short(x.body)
	}
	id, _ := v["id"].(string)
	if id == "" {
		return "", "no id: " + short(x.body)
	}
	if v[field] != sent {
		return id, fmt.Sprintf("%s %v, sent %v", field, v[field], sent)
	}
	return id, ""
}
