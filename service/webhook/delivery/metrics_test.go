package delivery_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svat/partnerapi/db"
)

// TestDeliveryMetrics: after one event to a healthy receiver (204), a
// failing one (500), one that answers 410 and an address that refuses the
// connection, /metrics on the admin listener counts each attempt by
// outcome and HTTP class, has one first-attempt lag sample per endpoint,
// counts the 410 as given up, and reads from the database the two
// deliveries left pending (the 500's and the refused one's, retried in an
// hour), their age, and the endpoints by status and reason (three enabled,
// one disabled gone). The scrape passes promtool check metrics.
func TestDeliveryMetrics(t *testing.T) {
	t.Parallel()
	h := harness(t, time.Hour)
	tn := h.NewFastTenant("Hooks Metrics")
	answer := func(status int) *receiver {
		rc := newReceiver(t)
		rc.answer = func(int, received) int { return status }
		_, secret := endpoint(t, h, tn, rc.URL, "lead.created")
		rc.trust(t, secret)
		return rc
	}
	healthy, failing, gone := answer(http.StatusNoContent), answer(http.StatusInternalServerError), answer(http.StatusGone)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	endpoint(t, h, tn, closed.URL, "lead.created")

	started := time.Now()
	create(t, h, tn.Token, "/api/v1/leads", `{"contact":{"email":"metrics@x.co"},"title":"Metrics"}`)
	waitFor(t, "four attempts recorded and the 410's endpoint disabled", func() bool {
		var attempts, gone int
		err := h.DB.WithTx(context.Background(), func(tx db.DBTX) error {
			return tx.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM webhook_attempts),
				(SELECT count(*) FROM webhook_endpoints WHERE disabled_reason = 'gone')`).Scan(&attempts, &gone)
		})
		return err == nil && attempts == 4 && gone == 1
	})
	for name, rc := range map[string]*receiver{"healthy": healthy, "failing": failing, "gone": gone} {
		rc.mu.Lock()
		if rc.calls != 1 {
			t.Errorf("the %s receiver got %d attempts, want 1", name, rc.calls)
		}
		rc.mu.Unlock()
	}

	text := scrape(t, h.Admin.URL)
	s := samples(t, text)
	for series, want := range map[string]float64{
		`partner_webhook_attempts_total{http_class="2xx",outcome="succeeded"}`:   1,
		`partner_webhook_attempts_total{http_class="5xx",outcome="failed"}`:      1,
		`partner_webhook_attempts_total{http_class="4xx",outcome="failed"}`:      1,
		`partner_webhook_attempts_total{http_class="none",outcome="failed"}`:     1,
		`partner_webhook_attempts_total{http_class="3xx",outcome="failed"}`:      0,
		`partner_webhook_first_attempt_lag_seconds_count`:                        4,
		`partner_webhook_first_attempt_lag_seconds_bucket{le="+Inf"}`:            4,
		`partner_webhook_deliveries_given_up_total{reason="gone"}`:               1,
		`partner_webhook_deliveries_given_up_total{reason="schedule_ended"}`:     0,
		`partner_webhook_deliveries_pending{endpoint_status="enabled"}`:          2,
		`partner_webhook_deliveries_pending{endpoint_status="disabled"}`:         0,
		`partner_webhook_endpoints{disabled_reason="",status="enabled"}`:         3,
		`partner_webhook_endpoints{disabled_reason="gone",status="disabled"}`:    1,
		`partner_webhook_endpoints{disabled_reason="failing",status="disabled"}`: 0,
		`partner_webhook_endpoints{disabled_reason="backlog",status="disabled"}`: 0,
		`partner_webhook_backlog_read_failures_total`:                            0,
		`partner_db_up`: 1,
	} {
		got, ok := s[series]
		if !ok {
			t.Errorf("/metrics lacks %s", series)
		} else if got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// Every first attempt started within the time the test took, and the
	// oldest pending event is about as old as the lead.
	took := time.Since(started).Seconds()
	if sum := s["partner_webhook_first_attempt_lag_seconds_sum"]; sum <= 0 || sum > 4*took {
		t.Errorf("first-attempt lags sum to %vs, want above 0 and at most 4 × %.3fs", sum, took)
	}
	if age := s["partner_webhook_oldest_pending_age_seconds"]; age <= 0 || age > took+1 {
		t.Errorf("oldest pending age %vs, want above 0 and at most %.3fs", age, took+1)
	}
	promtoolCheckMetrics(t, text)
}

// scrape reads GET /metrics of an admin listener without a token.
func scrape(t *testing.T, adminURL string) string {
	t.Helper()
	res, err := http.Get(adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v\n%s", res.StatusCode, err, b)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("/metrics Content-Type %q", ct)
	}
	return string(b)
}

// samples reads the samples of a Prometheus text scrape by series, as the
// Go client writes them (labels sorted by name).
func samples(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("a sample line that does not parse: %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// promtoolCheckMetrics runs promtool check metrics (Debian's prometheus
// package; scripts/install-deps.sh installs it) on a scrape, and fails on
// any problem it names.
func promtoolCheckMetrics(t *testing.T, text string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run scripts/install-deps.sh")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
