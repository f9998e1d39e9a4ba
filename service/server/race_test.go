package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/security/ratelimit"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// raceHarness runs a server whose failed-authentication buckets are off:
// every racing request on a rotated-away secret is a failed
// authentication, and these tests are about tokens, not lockouts.
func raceHarness(t *testing.T) *servertest.Harness {
	return servertest.New(t, servertest.Options{Config: func(c *server.Config) {
		limits := ratelimit.DefaultConfig()
		limits.AuthFailures = 0
		c.Limits = &limits
	}})
}

// issuer hammers the token endpoint with one client's credentials from 16
// goroutines while a change runs, and collects every token it got.
type issuer struct {
	h        *servertest.Harness
	id, sec  string
	mu       sync.Mutex
	tokens   []string
	failures []string
}

func (is *issuer) issue(client *http.Client) (int, string, error) {
	form := url.Values{"grant_type": {"client_credentials"}}.Encode()
	req, _ := http.NewRequest(http.MethodPost, is.h.Public.URL+"/api/oauth/token", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(is.id, is.sec)
	res, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, body.AccessToken, nil
}

// race runs 16 issuers on the current secret until each is refused (or
// 5 s pass), running change once they are under way.
func (is *issuer) race(change func()) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer client.CloseIdleConnections()
	var started, wg sync.WaitGroup
	var running atomic.Int32
	deadline := time.Now().Add(5 * time.Second)
	started.Add(16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for time.Now().Before(deadline) {
				running.Add(1)
				status, tok, err := is.issue(client)
				running.Add(-1)
				if first {
					started.Done()
					first = false
				}
				is.mu.Lock()
				switch {
				case err != nil:
					is.failures = append(is.failures, err.Error())
				case status == http.StatusOK:
					is.tokens = append(is.tokens, tok)
				case status != http.StatusUnauthorized:
					is.failures = append(is.failures, fmt.Sprintf("status %d", status))
				}
				is.mu.Unlock()
				if status == http.StatusUnauthorized {
					return
				}
			}
			if first {
				started.Done()
			}
		}()
	}
	started.Wait()
	change()
	wg.Wait()
}

// survivors returns the collected tokens that still answer 200 on /me.
func (is *issuer) survivors(t *testing.T) int {
	t.Helper()
	n := 0
	for _, tok := range is.tokens {
		s, _, body := is.h.Do(http.MethodGet, "/api/v1/me", tok, "", "")
		switch s {
		case http.StatusOK:
			n++
		case http.StatusUnauthorized:
		default:
			t.Fatalf("/me: %d %s", s, body)
		}
	}
	return n
}

// TestRotationRaceLeavesNoOldToken: many rounds of 16 concurrent token
// requests on the old secret racing rotate-secret. Once the rotation has
// returned and the requests have finished, no token issued with the old
// secret answers 200, whenever its issuance ran.
func TestRotationRaceLeavesNoOldToken(t *testing.T) {
	t.Parallel()
	h := raceHarness(t)
	ctx := context.Background()
	ws, m := h.Workspace("Race Co")
	id, sec := h.FastClient(ws, m, "contacts:read")
	issued, surviving := 0, 0
	for round := range 12 {
		is := &issuer{h: h, id: id, sec: sec}
		var newSec string
		is.race(func() {
			rot, err := h.AdminClient.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: id, MemberId: m}))
			if err != nil {
				t.Errorf("round %d: rotate: %v", round, err)
				return
			}
			newSec = rot.Msg.GetClientSecret()
		})
		if len(is.failures) > 0 {
			t.Fatalf("round %d: unexpected answers: %v", round, is.failures[:min(5, len(is.failures))])
		}
		if newSec == "" {
			t.FailNow()
		}
		issued += len(is.tokens)
		surviving += is.survivors(t)
		sec = newSec
	}
	if surviving > 0 {
		t.Fatalf("%d of %d tokens issued on an old secret still answer 200 after rotation", surviving, issued)
	}
	if issued == 0 {
		t.Fatal("no token was issued during the races; the test proves nothing")
	}
	t.Logf("%d tokens issued on old secrets, none survives", issued)
}

// TestDeactivateAndRevokeRaceLeaveNoToken: the same race against
// deactivate (no token of the client answers 200 while it is inactive) and
// against revoke of the client (none ever again).
func TestDeactivateAndRevokeRaceLeaveNoToken(t *testing.T) {
	t.Parallel()
	h := raceHarness(t)
	ctx := context.Background()
	ws, m := h.Workspace("Race Status Co")
	for _, action := range []string{"deactivate", "revoke"} {
		t.Run(action, func(t *testing.T) {
			issued, surviving := 0, 0
			for round := range 6 {
				id, sec := h.FastClient(ws, m, "contacts:read")
				is := &issuer{h: h, id: id, sec: sec}
				is.race(func() {
					var err error
					if action == "deactivate" {
						_, err = h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: id, MemberId: m}))
					} else {
						_, err = h.AdminClient.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: id, MemberId: m}))
					}
					if err != nil {
						t.Errorf("round %d: %s: %v", round, action, err)
					}
				})
				if len(is.failures) > 0 {
					t.Fatalf("round %d: unexpected answers: %v", round, is.failures[:min(5, len(is.failures))])
				}
				issued += len(is.tokens)
				surviving += is.survivors(t)
			}
			if surviving > 0 {
				t.Fatalf("%d of %d tokens still answer 200 after %s", surviving, issued, action)
			}
			if issued == 0 {
				t.Fatal("no token was issued during the races; the test proves nothing")
			}
		})
	}
}
