package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// TestDashboardAndAlertsNameExportedSeries: every PromQL expression of
// the Grafana dashboard (docs/grafana/partnerapi.json) and of the alert
// rules (docs/prometheus/alerts.yml) names only series that a real
// server's /metrics exports after traffic (a histogram by its _bucket,
// _sum or _count); the rules pass promtool check rules, and so do the
// dashboard's queries, written as recording rules. A renamed series, or a
// query of one that was never there, fails here rather than as an empty
// panel or an alert that can never fire.
func TestDashboardAndAlertsNameExportedSeries(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	traffic(t, h)
	res, err := http.Get(h.Admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", res.StatusCode)
	}
	exported := map[string]bool{}
	for line := range strings.Lines(string(body)) {
		if name, _, ok := strings.Cut(line, " "); ok && name != "#" {
			name, _, _ = strings.Cut(name, "{")
			exported[name] = true
		}
	}

	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name, Definition string
			}
		}
	}
	b, err := os.ReadFile("../../docs/grafana/partnerapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("docs/grafana/partnerapi.json: %v", err)
	}
	var dashExprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			dashExprs = append(dashExprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if m := regexp.MustCompile(`^label_values\((\w+),`).FindStringSubmatch(v.Definition); m != nil {
			dashExprs = append(dashExprs, m[1])
		}
	}
	ruleExprs := ruleExpressions(t, "../../docs/prometheus/alerts.yml")
	if len(dashExprs) < 20 || len(ruleExprs) < 6 {
		t.Fatalf("%d dashboard and %d rule expressions read: the readers lost some", len(dashExprs), len(ruleExprs))
	}

	named := map[string]bool{}
	for _, e := range slices.Concat(dashExprs, ruleExprs) {
		names := seriesNames(e)
		if len(names) == 0 {
			t.Errorf("no series named in %q", e)
		}
		for _, n := range names {
			named[n] = true
			if !exported[n] {
				t.Errorf("%q names %s, which /metrics does not export", e, n)
			}
		}
	}
	// What the dashboard and the alerts are for: each area is queried.
	for _, n := range []string{"http_server_request_duration_seconds_count", "http_server_request_duration_seconds_bucket",
		"partner_rate_limited_total", "pgxpool_acquired_connections", "partner_db_up", "partner_webhook_attempts_total",
		"partner_webhook_first_attempt_lag_seconds_bucket", "partner_webhook_deliveries_pending",
		"partner_webhook_oldest_pending_age_seconds", "partner_webhook_endpoints"} {
		if !named[n] {
			t.Errorf("neither the dashboard nor the alerts query %s", n)
		}
	}

	// promtool reads the rules, and the dashboard's queries as recording
	// rules (Grafana's variables given values), so a syntax error fails.
	promtool(t, "check", "rules", "../../docs/prometheus/alerts.yml")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*")
	for i, e := range dashExprs {
		b, _ := json.Marshal(vars.Replace(e))
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, b)
	}
	path := filepath.Join(t.TempDir(), "dashboard.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", path)
}

// TestSeriesNames: the reader of series names keeps the names of series
// and drops functions, aggregations, label matchers, grouping labels,
// ranges, offsets, keywords and strings.
func TestSeriesNames(t *testing.T) {
	t.Parallel()
	for e, want := range map[string][]string{
		`sum by (le, http_route) (rate(a_bucket{job=~"$job",x!~"|0"}[$__rate_interval]))`:                       {"a_bucket"},
		`max without (instance) (b) - max(b offset 1h) > 0 and on (job) c unless ignoring (x) group_left (y) d`: {"b", "b", "c", "d"},
		`deriv(max(e{s="enabled"})[30m:1m]) > 1 and bool f`:                                                     {"e", "f"},
		`histogram_quantile(0.99, sum by (le) (rate(g[5m]))) > 1e3 or vector(0)`:                                {"g"},
		`topk(10, h) / on() group_right() i`:                                                                    {"h", "i"},
		`partner_db_up`:                                                                                         {"partner_db_up"},
	} {
		if got := seriesNames(e); !slices.Equal(got, want) {
			t.Errorf("seriesNames(%q) = %q, want %q", e, got, want)
		}
	}
}

var (
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlOffsets  = regexp.MustCompile(`\boffset\s+-?[0-9a-z]+`)
	promqlWords    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promqlNumbers  = regexp.MustCompile(`\b[0-9][0-9.]*(?:e[+-]?[0-9]+)?`)
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "offset": true, "inf": true, "nan": true}
)

// seriesNames are the series an expression selects, in order: what is
// left once strings, label matchers, ranges, grouping label lists and
// offsets are removed, less function and aggregation names (a word
// followed by "("), keywords and numbers.
func seriesNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, `""`)
	e = promqlMatchers.ReplaceAllString(e, " ")
	e = promqlRanges.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	e = promqlOffsets.ReplaceAllString(e, " ")
	e = promqlNumbers.ReplaceAllString(e, " ")
	var out []string
	for _, m := range promqlWords.FindAllStringSubmatch(e, -1) {
		if m[1] != "" || promqlKeywords[strings.ToLower(m[0])] {
			continue
		}
		out = append(out, m[0])
	}
	return out
}

// ruleExpressions reads the expr of every rule of a rules file: a line
// "expr: ..." or a block "expr: |" and the lines indented under it.
func ruleExpressions(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		key := strings.TrimLeft(lines[i], " ")
		if !strings.HasPrefix(key, "expr:") {
			continue
		}
		indent := len(lines[i]) - len(key)
		v := strings.TrimSpace(strings.TrimPrefix(key, "expr:"))
		if v != "|" && v != ">" {
			out = append(out, v)
			continue
		}
		var block []string
		for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) > indent) {
			i++
			block = append(block, strings.TrimSpace(lines[i]))
		}
		out = append(out, strings.TrimSpace(strings.Join(block, " ")))
	}
	return out
}

// promtool runs promtool (Debian's prometheus package, installed by
// scripts/install-deps.sh) and fails the test on a non-zero exit.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run scripts/install-deps.sh")
	}
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
