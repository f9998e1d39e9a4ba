package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/pgserver"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/secret"
)

// scaleRow is one measurement of the scale run, and one line of its CSV.
type scaleRow struct {
	// scenario is "list" (one workspace of size contacts), "tenants" (the
	// list of one of many small workspaces; size is the table's total) or
	// "tokens" (GET /api/v1/me with size live tokens in the table).
	scenario string
	size     int
	// variant is "first" or "deep" for lists, "working-set" for tokens.
	variant string
	res     result
	rssMiB  float64
}

// runScale measures how the cost of a list page and of a token check
// grows with the data behind them (docs/performance.md, "Scale"): list
// pages of one workspace holding 10k, 100k and 1M contacts (first page
// and a page 90 % deep in a walk), a small workspace among 1,000 others
// against one workspace of 1M, and GET /api/v1/me with 1k, 100k and 1M
// live tokens in the table. Data is seeded with COPY, not the API.
func runScale(args []string) error {
	fs := flag.NewFlagSet("scale", flag.ExitOnError)
	duration := fs.Duration("duration", 5*time.Second, "measured time per point")
	warm := fs.Duration("warm", time.Second, "warm-up time per point")
	concurrency := fs.Int("concurrency", 16, "concurrent connections")
	sizes := fs.String("contacts", "10000,100000,1000000", "workspace sizes, ascending")
	tokenSizes := fs.String("tokens", "1000,100000,1000000", "live token counts, ascending")
	tenants := fs.Int("workspaces", 1000, "small workspaces of 1,000 contacts each")
	csvPath := fs.String("csv", "", "write the measurements to this CSV file")
	pngPath := fs.String("png", "", "draw the chart of the CSV into this PNG file")
	serverBin := fs.String("server", "bin/partnerapi", "the partnerapi binary to run")
	_ = fs.Parse(args)
	contactSizes, err := ints(*sizes)
	if err != nil {
		return err
	}
	liveTokens, err := ints(*tokenSizes)
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()

	dir, err := os.MkdirTemp("", "partnerbench-scale-")
	if err != nil {
		return err
	}
	_ = os.Chmod(dir, 0o755)
	defer os.RemoveAll(dir)
	fmt.Println("starting PostgreSQL …")
	pg, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "pg")})
	if err != nil {
		return err
	}
	defer pg.Stop(context.Background())
	d, err := db.Open(ctx, pg.URL)
	if err != nil {
		return err
	}
	_, err = db.Migrate(ctx, d)
	d.Close()
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	srv, err := startServer(ctx, *serverBin, pg.URL)
	if err != nil {
		return err
	}
	defer srv.stop()
	admin := adminv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+srv.admin)
	big, err := newTenant(ctx, admin, srv.base, "")
	if err != nil {
		return err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: *concurrency * 2, MaxConnsPerHost: *concurrency * 2, DisableCompression: true}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	measure := func(mk request) (result, error) {
		return load(ctx, client, *concurrency, *warm, *duration, http.StatusOK, mk)
	}
	var rows []scaleRow
	rss := func() float64 { return float64(procStatus(srv.cmd.Process.Pid, "VmRSS:")) / (1 << 20) }

	// 1. One workspace growing from 10k to 1M contacts.
	var key []byte
	if err := pool.QueryRow(ctx, "SELECT key FROM server_keys WHERE name = 'cursor'").Scan(&key); err != nil {
		return fmt.Errorf("read cursor key: %w", err)
	}
	cursors := listing.NewCursors(key)
	start := time.Now().Add(-90 * 24 * time.Hour).UTC().Truncate(time.Millisecond)
	if err := defineScaleFields(ctx, pool, big.workspace); err != nil {
		return err
	}
	var ids []uuid.UUID
	for _, n := range contactSizes {
		fmt.Printf("seeding the workspace to %d contacts …\n", n)
		from := len(ids)
		for i := from; i < n; i++ {
			ids = append(ids, opaqueid.New())
		}
		if err := copyContacts(ctx, pool, big.workspace, start, ids, from); err != nil {
			return err
		}
		if err := settle(ctx, pool); err != nil {
			return err
		}
		first, err := measure(getRequest(srv.base+"/api/v1/contacts?limit=100", "Authorization", "Bearer "+big.token))
		if err != nil {
			return fmt.Errorf("list first page at %d: %w", n, err)
		}
		// The page after the record 90 % of the way down the default
		// (-createdAt) order, as a walk of the whole workspace reaches it.
		i := n - 1 - n*9/10
		cur := cursors.Encode(listing.Binding{Workspace: big.workspace, Resource: "contacts", Sort: "-createdAt"},
			listing.Position{Key: start.Add(time.Duration(i) * time.Millisecond).UnixMicro(), ID: ids[i]})
		deep, err := measure(getRequest(srv.base+"/api/v1/contacts?limit=100&cursor="+cur, "Authorization", "Bearer "+big.token))
		if err != nil {
			return fmt.Errorf("list deep page at %d: %w", n, err)
		}
		rows = append(rows, scaleRow{"list", n, "first", first, rss()}, scaleRow{"list", n, "deep", deep, rss()})
		// An equality filter on a custom field (one contact in 1,000
		// holds the value) and a selective q (one contact's last name),
		// against the unfiltered first page above (issue 35).
		eq, err := measure(getRequest(srv.base+"/api/v1/contacts?limit=100&customFields.code=k7", "Authorization", "Bearer "+big.token))
		if err != nil {
			return fmt.Errorf("list custom field filter at %d: %w", n, err)
		}
		q, err := measure(getRequest(srv.base+"/api/v1/contacts?limit=100&q="+scaleLastName(n / 2)[1:], "Authorization", "Bearer "+big.token))
		if err != nil {
			return fmt.Errorf("list search at %d: %w", n, err)
		}
		rows = append(rows, scaleRow{"list", n, "custom-eq", eq, rss()}, scaleRow{"list", n, "search", q, rss()})
	}

	// 2. A small workspace among many.
	if *tenants > 0 {
		fmt.Printf("seeding %d workspaces of 1,000 contacts …\n", *tenants)
		small, err := copyTenants(ctx, pool, *tenants, start)
		if err != nil {
			return err
		}
		if err := settle(ctx, pool); err != nil {
			return err
		}
		tn, err := newTenant(ctx, admin, srv.base, opaqueid.Format(opaqueid.Workspace, small))
		if err != nil {
			return err
		}
		first, err := measure(getRequest(srv.base+"/api/v1/contacts?limit=100", "Authorization", "Bearer "+tn.token))
		if err != nil {
			return fmt.Errorf("list of a small workspace: %w", err)
		}
		rows = append(rows, scaleRow{"tenants", *tenants * 1000, "first", first, rss()})
	}

	// 3. The token check with more and more live tokens.
	var tokens []string
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range liveTokens {
		fmt.Printf("seeding %d live tokens …\n", n)
		from := len(tokens)
		for len(tokens) < n {
			tok, _ := secret.NewToken()
			tokens = append(tokens, tok)
		}
		if err := copyTokens(ctx, pool, big, tokens[from:]); err != nil {
			return err
		}
		if err := settle(ctx, pool); err != nil {
			return err
		}
		// Partners reuse their tokens: the traffic comes from a working
		// set of 1,000 tokens drawn from all the live ones.
		working := make([]string, 1000)
		for i := range working {
			working[i] = "Bearer " + tokens[r.IntN(len(tokens))]
		}
		me := func(i int64) (*http.Request, error) {
			req, err := http.NewRequest(http.MethodGet, srv.base+"/api/v1/me", nil)
			if err == nil {
				req.Header.Set("Authorization", working[i%int64(len(working))])
			}
			return req, err
		}
		res, err := measure(me)
		if err != nil {
			return fmt.Errorf("token check with %d tokens: %w", n, err)
		}
		// Then every token once (up to 150,000), to fill the cache to its
		// bound, and read the RSS that leaves.
		if err := sweep(ctx, client, *concurrency, tokens[:min(len(tokens), 150_000)], srv.base+"/api/v1/me"); err != nil {
			return err
		}
		rows = append(rows, scaleRow{"tokens", n, "working-set", res, rss()})
	}

	printScale(rows, contactSizes, liveTokens)
	if *csvPath != "" {
		if err := writeScaleCSV(*csvPath, rows); err != nil {
			return err
		}
		fmt.Println("wrote", *csvPath)
		if *pngPath != "" {
			if err := chart(*csvPath, *pngPath); err != nil {
				return err
			}
			fmt.Println("wrote", *pngPath)
		}
	}
	return nil
}

// benchTenant is a workspace with an all-scope client and its token.
type benchTenant struct {
	workspace uuid.UUID
	client    uuid.UUID
	token     string
}

// newTenant makes a member, a client and a token in workspaceID, creating
// the workspace when workspaceID is empty.
func newTenant(ctx context.Context, admin adminv1connect.AdminServiceClient, base, workspaceID string) (benchTenant, error) {
	if workspaceID == "" {
		ws, err := admin.CreateWorkspace(ctx, connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "Scale"}))
		if err != nil {
			return benchTenant{}, err
		}
		workspaceID = ws.Msg.GetId()
	}
	m, err := admin.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: workspaceID, Email: "bench@x.co", SettingsAccess: true}))
	if err != nil {
		return benchTenant{}, err
	}
	cl, err := admin.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{WorkspaceId: workspaceID, MemberId: m.Msg.GetId(),
		Name: "bench", Scopes: []string{"contacts:read", "contacts:write", "leads:read", "leads:write"}, ReadRate: &fastRate, WriteRate: &fastRate}))
	if err != nil {
		return benchTenant{}, err
	}
	token, err := getToken(base, "Basic "+basicAuth(cl.Msg.GetClientId(), cl.Msg.GetClientSecret()))
	if err != nil {
		return benchTenant{}, err
	}
	ws, _ := opaqueid.Parse(opaqueid.Workspace, workspaceID)
	id, _ := opaqueid.Parse(opaqueid.Client, cl.Msg.GetClientId())
	return benchTenant{workspace: ws, client: id, token: token}, nil
}

// scaleFields is the number of custom fields defined on the big
// workspace's contacts, each holding a value in every contact.
const scaleFields = 20

// defineScaleFields defines the custom fields of the big workspace: code
// (text; one contact in 1,000 holds each value, the filter measured),
// then numbers, dates, booleans and selects up to scaleFields.
func defineScaleFields(ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID) error {
	_, err := pool.Exec(ctx, `
		INSERT INTO custom_fields (workspace_id, id, object, key, label, type, options)
		SELECT $1, gen_random_uuid(), 'contact', CASE WHEN i = 1 THEN 'code' ELSE 'f' || i END, 'Field ' || i,
		       (ARRAY['text', 'number', 'date', 'boolean', 'select'])[1 + (i - 1) % 5],
		       CASE WHEN (i - 1) % 5 = 4 THEN '[{"value": "a", "label": "A"}, {"value": "b", "label": "B"}, {"value": "c", "label": "C"}]'::jsonb END
		FROM generate_series(1, $2::int) i`, ws, scaleFields)
	if err != nil {
		return fmt.Errorf("define custom fields: %w", err)
	}
	return nil
}

// scaleCustomFields is contact i's custom_fields, one value for each
// field of defineScaleFields.
func scaleCustomFields(i int) string {
	var b strings.Builder
	b.WriteString(`{"code": "k` + strconv.Itoa(i%1000) + `"`)
	for f := 2; f <= scaleFields; f++ {
		b.WriteString(`, "f` + strconv.Itoa(f) + `": `)
		switch (f - 1) % 5 {
		case 0:
			b.WriteString(`"text ` + strconv.Itoa(i%97) + `"`)
		case 1:
			b.WriteString(strconv.Itoa(i % 10007))
		case 2:
			b.WriteString(`"2026-0` + strconv.Itoa(1+i%9) + `-1` + strconv.Itoa(i%9) + `"`)
		case 3:
			b.WriteString(strconv.FormatBool(i%2 == 0))
		case 4:
			b.WriteString(`"` + string(rune('a'+i%3)) + `"`)
		}
	}
	b.WriteString("}")
	return b.String()
}

// scaleLastName is contact i's last name: "L" and eight letters of a
// hash, rare enough that q of it finds one contact or a few.
func scaleLastName(i int) string {
	x := uint32(i)*2654435761 + 0x9e3779b9
	return "L" + fmt.Sprintf("%08x", x)
}

// copyContacts copies contacts ids[from:] into ws; contact i was created
// i milliseconds after start, and holds a value in each custom field.
func copyContacts(ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID, start time.Time, ids []uuid.UUID, from int) error {
	i := from
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"contacts"},
		[]string{"workspace_id", "id", "email", "first_name", "last_name", "company_name", "custom_fields", "created_at", "updated_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == len(ids) {
				return nil, nil
			}
			ts := start.Add(time.Duration(i) * time.Millisecond)
			row := []any{ws, ids[i], "scale-" + strconv.Itoa(i) + "@bench.test", "Ada", scaleLastName(i), "Analytical Engines Ltd",
				scaleCustomFields(i), ts, ts}
			i++
			return row, nil
		}))
	if err != nil {
		return fmt.Errorf("copy contacts: %w", err)
	}
	return nil
}

// copyTenants copies n workspaces of 1,000 contacts each and returns the
// id of the one in the middle.
func copyTenants(ctx context.Context, pool *pgxpool.Pool, n int, start time.Time) (uuid.UUID, error) {
	wss := make([]uuid.UUID, n)
	for i := range wss {
		wss[i] = opaqueid.New()
	}
	i := 0
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"workspaces"}, []string{"id", "name"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == n {
				return nil, nil
			}
			i++
			return []any{wss[i-1], "Tenant " + strconv.Itoa(i)}, nil
		}))
	if err != nil {
		return uuid.UUID{}, fmt.Errorf("copy workspaces: %w", err)
	}
	// Interleaved in time, as real tenants' writes are.
	k := 0
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"contacts"},
		[]string{"workspace_id", "id", "email", "created_at", "updated_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if k == n*1000 {
				return nil, nil
			}
			ts := start.Add(time.Duration(k) * time.Millisecond)
			row := []any{wss[k%n], opaqueid.New(), "t" + strconv.Itoa(k) + "@tenant.test", ts, ts}
			k++
			return row, nil
		}))
	if err != nil {
		return uuid.UUID{}, fmt.Errorf("copy tenant contacts: %w", err)
	}
	return wss[n/2], nil
}

// copyTokens copies live tokens of t's client.
func copyTokens(ctx context.Context, pool *pgxpool.Pool, t benchTenant, tokens []string) error {
	now := time.Now().UTC()
	i := 0
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"access_tokens"},
		[]string{"token_hash", "workspace_id", "client_id", "scopes", "created_at", "expires_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == len(tokens) {
				return nil, nil
			}
			h := secret.HashOf(tokens[i])
			i++
			return []any{h[:], t.workspace, t.client, []string{"contacts:read", "leads:read"}, now, now.Add(365 * 24 * time.Hour)}, nil
		}))
	if err != nil {
		return fmt.Errorf("copy tokens: %w", err)
	}
	return nil
}

// settle refreshes statistics and checkpoints, so the seed does not
// compete with the measurement.
func settle(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, "CHECKPOINT")
	return err
}

// sweep sends GET u once with each token, concurrently.
func sweep(ctx context.Context, client *http.Client, concurrency int, tokens []string, u string) error {
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(tokens)) {
					return
				}
				req, _ := http.NewRequest(http.MethodGet, u, nil)
				req.Header.Set("Authorization", "Bearer "+tokens[i])
				res, err := client.Do(req)
				if err != nil || res.StatusCode != http.StatusOK {
					failed.Add(1)
				}
				if err == nil {
					res.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("sweep: %d of %d token checks failed", n, len(tokens))
	}
	return ctx.Err()
}

// printScale prints the measurements and the scale lines of
// docs/performance.md, marking a missed line.
func printScale(rows []scaleRow, sizes, tokens []int) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "scenario\tsize\tvariant\treq/s\tp50\tp99\tRSS MiB\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%s\t%s\t%.0f\t\n", r.scenario, r.size, r.variant, r.res.rps, ms(r.res.p50), ms(r.res.p99), r.rssMiB)
	}
	tw.Flush()
	find := func(scenario string, size int, variant string) *scaleRow {
		for i := range rows {
			if rows[i].scenario == scenario && (size < 0 || rows[i].size == size) && rows[i].variant == variant {
				return &rows[i]
			}
		}
		return nil
	}
	line := func(name string, ratio, limit float64, atMost bool) {
		ok := ratio >= limit
		sign := "≥"
		if atMost {
			ok, sign = ratio <= limit, "≤"
		}
		mark := "ok"
		if !ok {
			mark = "MISSED"
		}
		fmt.Printf("  %-58s %5.2f  (line %s %.2f) %s\n", name, ratio, sign, limit, mark)
	}
	fmt.Println("\nscale lines:")
	lo, hi := sizes[0], sizes[len(sizes)-1]
	for _, v := range []string{"first", "deep"} {
		a, b := find("list", lo, v), find("list", hi, v)
		if a != nil && b != nil {
			line(fmt.Sprintf("list-100 %s page p50 at %d / at %d", v, hi, lo), float64(b.res.p50)/float64(a.res.p50), 1.25, true)
		}
	}
	for _, n := range sizes {
		first := find("list", n, "first")
		if eq := find("list", n, "custom-eq"); first != nil && eq != nil {
			line(fmt.Sprintf("list-100 custom field filter p50 / unfiltered, at %d", n), float64(eq.res.p50)/float64(first.res.p50), 3, true)
		}
		if q := find("list", n, "search"); first != nil && q != nil {
			line(fmt.Sprintf("list-100 selective q p50 / unfiltered, at %d", n), float64(q.res.p50)/float64(first.res.p50), 10, true)
		}
	}
	if a, b := find("list", hi, "first"), find("tenants", -1, "first"); a != nil && b != nil {
		line(fmt.Sprintf("list-100 p50, small workspace among many / one of %d", hi), float64(b.res.p50)/float64(a.res.p50), 1.25, true)
	}
	t0, t1 := find("tokens", tokens[0], "working-set"), find("tokens", tokens[len(tokens)-1], "working-set")
	if t0 != nil && t1 != nil {
		line(fmt.Sprintf("token check req/s with %d tokens / with %d", tokens[len(tokens)-1], tokens[0]), t1.res.rps/t0.res.rps, 0.9, false)
		line("server RSS MiB after every token once (cache bound)", t1.rssMiB, 256, true)
	}
}

func writeScaleCSV(path string, rows []scaleRow) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"scenario", "size", "variant", "rps", "p50_ms", "p99_ms", "rss_mib"})
	for _, r := range rows {
		_ = w.Write([]string{r.scenario, strconv.Itoa(r.size), r.variant, fmt.Sprintf("%.0f", r.res.rps),
			fmt.Sprintf("%.3f", float64(r.res.p50)/1e6), fmt.Sprintf("%.3f", float64(r.res.p99)/1e6), fmt.Sprintf("%.1f", r.rssMiB)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func ints(list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, errors.New("want ascending positive integers: " + list)
		}
		out = append(out, n)
	}
	return out, nil
}
