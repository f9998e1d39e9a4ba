package settings_test

import (
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// TestASecretFormSentTwiceAtOnceActsOnce: the same "Create API client"
// form, and then the same "Rotate secret" form, sent four times at once
// from one signed-in browser (a double click) act once: one answer shows
// the secret, the others are 409 "Already done" without one, one client
// exists, and the rotated secret shown works. Before migration 00118 each
// send carried the cookie from before the others' answers, and four
// clients were made.
func TestASecretFormSentTwiceAtOnceActsOnce(t *testing.T) {
	h := servertest.New(t)
	ws, member := h.Workspace("Twice")
	b := newBrowser(t, h)
	b.do("GET", signInLink(t, h, member, 0), nil)
	same := []string{"Sec-Fetch-Site", "same-origin"}

	// sendAtOnce sends form to path four times at once and returns the
	// secrets shown, the last page that showed one, and the count of 409s.
	var shown string
	sendAtOnce := func(path string, form url.Values) (secrets []string, refused int) {
		t.Helper()
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, page := b.do("POST", path, form, same...)
				mu.Lock()
				defer mu.Unlock()
				switch secret := secretOnPage.FindString(page); {
				case res.StatusCode == http.StatusOK && secret != "":
					secrets = append(secrets, secret)
					shown = page
				case res.StatusCode == http.StatusConflict && secret == "":
					refused++
				default:
					t.Errorf("POST %s: status %d\n%s", path, res.StatusCode, page)
				}
			}()
		}
		close(start)
		wg.Wait()
		return secrets, refused
	}

	_, page := b.do("GET", "/settings/clients/new", nil)
	create := url.Values{"csrf": {csrf(t, page)}, "form_id": {formID(t, page)}, "name": {"twice"}, "scope": {"contacts:read"}}
	secrets, refused := sendAtOnce("/settings/clients", create)
	if len(secrets) != 1 || refused != 3 {
		t.Fatalf("create sent four times at once: %d secrets shown, %d refused; want 1 and 3", len(secrets), refused)
	}
	if n := clientCount(t, h, ws, member); n != 1 {
		t.Fatalf("%d clients after the create form was sent four times at once, want 1", n)
	}

	clientID := regexp.MustCompile(`cli_[a-z0-9]+`).FindString(shown)
	_, page = b.do("GET", "/settings/clients/"+clientID+"/rotate", nil)
	rotate := url.Values{"csrf": {csrf(t, page)}, "form_id": {formID(t, page)}}
	rotated, refused := sendAtOnce("/settings/clients/"+clientID+"/rotate", rotate)
	if len(rotated) != 1 || refused != 3 {
		t.Fatalf("rotate sent four times at once: %d secrets shown, %d refused; want 1 and 3", len(rotated), refused)
	}
	if status, _, _ := tokenStatus(t, h, clientID, rotated[0]); status != http.StatusOK {
		t.Fatalf("the one rotated secret shown: token status %d, want 200 (rotated once)", status)
	}
}
