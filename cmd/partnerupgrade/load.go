package main

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// load sends the partner requests of the run, to the replicas in the
// rotation, and keeps what they acknowledged.
type load struct {
	rot       *rotation
	tn        *tenant
	led       *ledger
	st        *stats
	phaseName func() string // the phase a request starts in
	seq       atomic.Int64

	sync, events *walker
}

func newLoad(rot *rotation, tn *tenant, st *stats, phaseName func() string) *load {
	return &load{rot: rot, tn: tn, led: newLedger(), st: st, phaseName: phaseName, sync: newSyncWalker(), events: newEventsWalker()}
}

// exchange is one request of the load and its answer.
type exchange struct {
	answer
	at      time.Time
	phase   string
	kind    string
	replica string
}

// send routes c to the next replica of the rotation.
func (l *load) send(kind string, c call) exchange {
	ph := l.phaseName()
	r, release, err := l.rot.acquire()
	if err != nil {
		return exchange{answer: answer{body: []byte(err.Error())}, at: time.Now(), phase: ph, kind: kind, replica: "-"}
	}
	defer release()
	return l.sendTo(r, ph, kind, c)
}

// sendTo sends c to r, which the caller acquired.
func (l *load) sendTo(r *replica, phase, kind string, c call) exchange {
	at := time.Now()
	return exchange{answer: c.send(r), at: at, phase: phase, kind: kind, replica: r.String()}
}

// judge counts x: served when its status is want and the caller found no
// problem in its body; a failure otherwise.
func (l *load) judge(x exchange, want int, problem string) bool {
	class := problem
	switch {
	case x.status == 0:
		problem, class = "no answer: "+string(x.body), "no answer"
	case x.status != want:
		problem = fmt.Sprintf("%d (want %d) %s", x.status, want, short(x.body))
		class = fmt.Sprintf("%d %s", x.status, problemCode(x.body))
	case problem == "":
		l.st.ok(x.phase, x.kind)
		return true
	}
	if len(class) > 60 {
		class = class[:60] + "…"
	}
	l.st.fail(failure{at: x.at, phase: x.phase, kind: x.kind, replica: x.replica, class: class, detail: problem})
	return false
}

// problemCode is the code of a problem+json or OAuth error body.
func problemCode(body []byte) string {
	var p struct {
		Code  string `json:"code"`
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.Code + p.Error
}

// mixed is the cycle of each mixed client: every kind of write and read a
// partner sends, in the proportions of the run (more creates than
// patches, more patches than deletes, so records of every history
// remain to be checked).
var mixed = []func(l *load){
	(*load).token, (*load).createContact, (*load).createLead, (*load).listContacts,
	(*load).patchContact, (*load).createLeadBatch, (*load).createLead, (*load).listLeads,
	(*load).patchLead, (*load).createContact, (*load).patchContact, (*load).deleteContact,
	(*load).patchLead, (*load).deleteLead, (*load).replayLead, (*load).createLead,
}

// start runs the load until stop is called: workers mixed clients sending
// rate requests a second together, a client sending eight lead creates at
// once four times a second, and the sync and events walkers, ten pages a
// second each.
func (l *load) start(workers int, rate float64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	paced := func(every time.Duration, step func(i int)) {
		wg.Go(func() {
			next := time.Now()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-time.After(time.Until(next)):
				}
				step(i)
				next = next.Add(every)
				if now := time.Now(); next.Before(now) {
					next = now // behind (a slow answer): no burst to catch up
				}
			}
		})
	}
	every := time.Duration(float64(time.Second) * float64(workers) / rate)
	for w := range workers {
		paced(every, func(i int) { mixed[(w*len(mixed)/workers+i)%len(mixed)](l) })
	}
	paced(250*time.Millisecond, func(int) { l.createLeadGroup(8) })
	paced(100*time.Millisecond, func(int) { l.walk(l.sync) })
	paced(100*time.Millisecond, func(int) { l.walk(l.events) })
	return func() { close(done); wg.Wait() }
}
