package server_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// TestConcurrentPatchesAllApply: patches without If-Match of one record
// by many clients at once all apply (last writer wins, field by field).
// They used to answer "being changed by other requests; retry" once three
// optimistic rounds had all lost a race (about a third of them with six
// writers); the last round now locks the row, so it cannot lose.
func TestConcurrentPatchesAllApply(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Busy Record")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"busy@x.co"}`)
	contact := decode(t, b)["id"].(string)
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+contact+`"}`)
	lead := decode(t, b)["id"].(string)

	const writers, rounds = 8, 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for g := range writers {
		wg.Go(func() {
			for i := range rounds {
				for _, p := range []struct{ path, body string }{
					{"/api/v1/contacts/" + contact, fmt.Sprintf(`{"jobTitle":"t%d-%d"}`, g, i)},
					{"/api/v1/leads/" + lead, fmt.Sprintf(`{"campaign":"c%d-%d"}`, g, i)},
				} {
					s, _, b := h.Do(http.MethodPatch, p.path, tn.Token, "application/merge-patch+json", p.body)
					if s != 200 {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("PATCH %s %s: %d %s", p.path, p.body, s, b))
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d patches failed, e.g. %s", len(failures), 2*writers*rounds, failures[0])
	}
}
