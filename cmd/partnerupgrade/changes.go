package main

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// patchCall is a JSON merge patch of one record.
func (l *load) patchCall(path string, patch map[string]any) call {
	c := l.tn.jsonCall(http.MethodPatch, path, patch, "")
	c.contentType = "application/merge-patch+json"
	return c
}

// patchContact sets the job title of a contact the load created.
func (l *load) patchContact() {
	rec := l.led.toPatch("contact")
	if rec == nil {
		return
	}
	title := fmt.Sprintf("patched %d", l.seq.Add(1))
	x := l.send("contact-patch", l.patchCall("/api/v1/contacts/"+rec.id, map[string]any{"jobTitle": title}))
	problem := fieldsDiffer(x, map[string]string{"id": rec.id, "email": rec.email, "jobTitle": title})
	if l.judge(x, http.StatusOK, problem) {
		l.led.patchedOK(rec, func(r *record) { r.jobTitle = title })
		return
	}
	l.led.settle(rec, func(r *record) { r.uncertain = true })
}

// patchLead qualifies a lead the load created and changes its campaign.
func (l *load) patchLead() {
	rec := l.led.toPatch("lead")
	if rec == nil {
		return
	}
	campaign := rec.campaign + "-patched"
	x := l.send("lead-patch", l.patchCall("/api/v1/leads/"+rec.id, map[string]any{"status": "qualified", "campaign": campaign}))
	problem := fieldsDiffer(x, map[string]string{"id": rec.id, "status": "qualified", "campaign": campaign})
	if l.judge(x, http.StatusOK, problem) {
		l.led.patchedOK(rec, func(r *record) { r.status, r.campaign = "qualified", campaign })
		return
	}
	l.led.settle(rec, func(r *record) { r.uncertain = true })
}

// deleteContact deletes a contact the load created and patched.
func (l *load) deleteContact() { l.deleteOne("contact", "/api/v1/contacts/") }

// deleteLead deletes a lead the load created and patched.
func (l *load) deleteLead() { l.deleteOne("lead", "/api/v1/leads/") }

func (l *load) deleteOne(kind, path string) {
	rec := l.led.toDelete(kind)
	if rec == nil {
		return
	}
	x := l.send(kind+"-delete", call{method: http.MethodDelete, path: path + rec.id, token: l.tn.bearer()})
	ok := l.judge(x, http.StatusNoContent, "")
	l.led.settle(rec, func(r *record) {
		r.deleted = ok
		r.uncertain = !ok
	})
}

// fieldsDiffer names a member of a 200 answer that is not what it must
// be, or is empty.
func fieldsDiffer(x exchange, want map[string]string) string {
	if x.status != http.StatusOK {
		return ""
	}
	var v map[string]any
	if err := json.Unmarshal(x.body, &v); err != nil {
		return "unreadable answer: " + short(x.body)
	}
	for k, w := range want {
		if got, _ := v[k].(string); got != w {
			return fmt.Sprintf("%s is %q, want %q: %s", k, got, w, short(x.body))
		}
	}
	return ""
}
