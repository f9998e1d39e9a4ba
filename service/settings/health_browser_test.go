package settings_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// seedAttempts gives an endpoint a day of deliveries, as the delivery
// engine would have written them (its own tests cover that): 12 attempts
// succeeded five hours ago (its last success), then 3 failed, one and two
// hours ago and the newest just now, so it is failing since two hours
// ago; an attempt older than the chart's 24 hours; and 4 pending
// deliveries.
func seedAttempts(t *testing.T, h *servertest.Harness, endpoint uuid.UUID) {
	t.Helper()
	raw := dbtest.Raw(t, h.DB)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO webhook_attempts (workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status, duration_ms, at)
		 SELECT workspace_id, id, gen_random_uuid(), 'lead.created', 1, 'succeeded', 200, 40, now() - interval '5 hours' + n * interval '1 second'
		 FROM webhook_endpoints, generate_series(1, 12) AS n WHERE id = $1`,
		`INSERT INTO webhook_attempts (workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status, duration_ms, at)
		 SELECT workspace_id, id, gen_random_uuid(), 'lead.created', 1, 'succeeded', 200, 40, now() - interval '30 hours'
		 FROM webhook_endpoints WHERE id = $1`,
		`INSERT INTO webhook_attempts (workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status, duration_ms, error, at)
		 SELECT workspace_id, id, gen_random_uuid(), 'lead.created', a, 'failed', NULL, 10000, 'timeout', now() - d
		 FROM webhook_endpoints, (VALUES (1, interval '2 hours'), (2, interval '1 hour'), (3, interval '1 second')) AS v(a, d) WHERE id = $1`,
		`UPDATE webhook_endpoints SET last_success_at = now() - interval '5 hours' + interval '12 seconds' WHERE id = $1`,
		`INSERT INTO webhook_deliveries (workspace_id, endpoint_id, event_xid, event_seq, event_id, event_type, record_id)
		 SELECT workspace_id, id, 1, n, gen_random_uuid(), 'lead.created', gen_random_uuid()
		 FROM webhook_endpoints, generate_series(1, 4) AS n WHERE id = $1`,
	} {
		if _, err := raw.Exec(ctx, q, endpoint); err != nil {
			t.Fatalf("seed deliveries: %v", err)
		}
	}
}

// TestEndpointHealthInBrowser: an endpoint's row says how its deliveries
// fare, in chromium, axe-clean: its status, its last success, since when
// it has been failing, its pending deliveries, and a chart of the last 24
// hours (an image named by its title and described by its summary, which
// is also written beside it: "24 h: 12 succeeded, 3 failed"; the attempt
// of 30 hours ago is not in it). A healthy endpoint that never received
// anything reads "never" and "not failing". Before, the row said only
// "enabled".
func TestEndpointHealthInBrowser(t *testing.T) {
	ctx := newBrowserTab(t)
	axe := axeSource(t)
	h := servertest.New(t)
	ws, member := h.Workspace("Health")
	clientID, _ := h.Client(ws, member, "leads:read")
	failing := seedEndpoint(t, h, ws, clientID, "https://hooks.example.com/failing")
	seedAttempts(t, h, failing)
	quiet := seedEndpoint(t, h, ws, clientID, "https://hooks.example.com/quiet")
	b := tab{t: t, ctx: ctx}
	b.open(signInLink(t, h, member, 0))
	b.waitHeading("API clients")
	b.open(h.Admin.URL + "/settings/clients/" + clientID)
	b.waitHeading("test client")
	b.axe(axe, "the client's page with endpoint health")

	type row struct{ Cells []string }
	rows := evalIn[[]row](b, `[...document.querySelectorAll("table[aria-labelledby=webhooks] tbody tr")].map(r => ({Cells: [...r.cells].map(c => c.innerText.replace(/\s+/g, " ").trim())}))`)
	if len(rows) != 2 {
		t.Fatalf("%d endpoint rows, want 2: %v", len(rows), rows)
	}
	heads := evalIn[[]string](b, `[...document.querySelectorAll("table[aria-labelledby=webhooks] thead th")].map(c => c.textContent)`)
	if strings.Join(heads, "|") != "URL|Status|Last success|Failing since|Pending|Last 24 hours|Action" {
		t.Fatalf("column heads %v", heads)
	}
	f, q := rows[0].Cells, rows[1].Cells
	if f[0] != "https://hooks.example.com/failing" || f[1] != "enabled" || !strings.HasSuffix(f[2], " UTC") || !strings.HasSuffix(f[3], " UTC") ||
		f[4] != "4" || f[5] != "24 h: 12 succeeded, 3 failed" || f[6] != "Disable" {
		t.Fatalf("the failing endpoint's row: %q", f)
	}
	if f[2] >= f[3] {
		t.Fatalf("last success %q is not before failing since %q", f[2], f[3])
	}
	if q[0] != "https://hooks.example.com/quiet" || q[2] != "never" || q[3] != "not failing" || q[4] != "0" || q[5] != "24 h: 0 succeeded, 0 failed" {
		t.Fatalf("the quiet endpoint's row: %q", q)
	}
	// The times are machine-readable too.
	if n := evalIn[int](b, `document.querySelectorAll("table[aria-labelledby=webhooks] time[datetime]").length`); n != 2 {
		t.Fatalf("%d <time datetime> in the rows, want 2 (last success and failing since)", n)
	}

	// The chart is an image with a name and a description (the summary,
	// and which hours failed), found by role.
	id := opaqueid.Format(opaqueid.Webhook, failing)
	charts := b.query("image", "Delivery attempts per hour over the last 24 hours, succeeded and failed")
	if len(charts) != 2 {
		t.Fatalf("%d charts named as such, want one per endpoint", len(charts))
	}
	desc := evalIn[string](b, `document.getElementById("chart-`+id+`-desc").textContent`)
	if desc != "24 h: 12 succeeded, 3 failed. Failed attempts in 3 of the last 24 hours." {
		t.Fatalf("the chart's description %q", desc)
	}
	// Bars: one succeeded hour, three failed ones; every hour with
	// attempts has a title saying its counts.
	if ok, bad := evalIn[int](b, `document.querySelectorAll("#chart-`+id+`-desc ~ g rect.ok").length`),
		evalIn[int](b, `document.querySelectorAll("#chart-`+id+`-desc ~ g rect.failed").length`); ok != 1 || bad < 2 || bad > 3 {
		t.Fatalf("bars: %d succeeded, %d failed; want 1 and 2 or 3 (two failures may share an hour)", ok, bad)
	}
	if titles := evalIn[[]string](b, `[...document.querySelectorAll("#chart-`+id+`-desc ~ g > title")].map(t => t.textContent)`); len(titles) < 3 ||
		!strings.Contains(strings.Join(titles, "\n"), ": 12 succeeded, 0 failed") {
		t.Fatalf("bar titles %q", titles)
	}
	// The CSP allows what the page draws: no style attribute anywhere.
	if n := evalIn[int](b, `document.querySelectorAll("[style]").length`); n != 0 {
		t.Fatalf("%d elements with a style attribute (the CSP refuses them)", n)
	}
	res, _ := http.Get(h.Admin.URL + "/settings/")
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "style-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("CSP %q", csp)
	}
	_ = res.Body.Close()
	_ = quiet
}
