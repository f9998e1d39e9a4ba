package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/security/sealed"
)

// serveWith runs `partnerapi serve` with extra environment and waits for
// /readyz. The caller stops it.
// testSecretKey seals the webhook secrets of the servers the tests start
// on a database of their own (PARTNER_SECRET_KEY).
var testSecretKey = sealed.NewKey()

func serveWith(t *testing.T, bin string, env ...string) *daemon {
	t.Helper()
	d := &daemon{log: &syncBuffer{}}
	d.cmd = exec.Command(bin, "serve")
	d.cmd.Env = append(append(os.Environ(), "PARTNER_HTTP_ADDR=127.0.0.1:0", "PARTNER_ADMIN_ADDR=127.0.0.1:0", "PARTNER_ADMIN_TOKEN=",
		"PARTNER_SECRET_KEY="+testSecretKey), env...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
			_ = d.cmd.Wait()
		}
	})
	d.waitReady(t)
	return d
}

// TestShutdownIsBoundedAndLosesNothing: requests are blocked behind a
// table lock (with statement timeouts far longer than the shutdown
// timeout) when SIGTERM comes. /readyz turns 503 at once while the
// listener keeps serving for PARTNER_SHUTDOWN_DELAY; the process exits
// within PARTNER_SHUTDOWN_TIMEOUT; the blocked creates are cancelled in
// the database and rolled back; every create acknowledged before is there.
func TestShutdownIsBoundedAndLosesNothing(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	c := dbtest.NewCluster(t)
	const timeout = 10 * time.Second
	d := serveWith(t, bin, "DATABASE_URL="+c.URL, "PARTNER_SHUTDOWN_DELAY=1s", fmt.Sprintf("PARTNER_SHUTDOWN_TIMEOUT=%s", timeout),
		"PARTNER_DB_STATEMENT_TIMEOUT=60s", "PARTNER_REQUEST_TIMEOUT=60s")
	ws := cli(t, bin, d, "", "workspace", "create", "--name", "Shutdown Co")["id"].(string)
	m := cli(t, bin, d, "", "member", "add", "--workspace", ws, "--email", "ops@shutdown.test", "--settings-access")["id"].(string)
	cl := cli(t, bin, d, "", "client", "create", "--workspace", ws, "--member", m, "--name", "n", "--scopes", "contacts:write")
	s, tok := token(t, d, cl["clientId"].(string), cl["clientSecret"].(string))
	if s != 200 {
		t.Fatalf("token: %d", s)
	}
	create := func(email string) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.public+"/api/v1/contacts", strings.NewReader(`{"email":"`+email+`"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil
	}
	var acked []string
	for i := range 10 {
		email := fmt.Sprintf("before-%d@shutdown.test", i)
		if s, err := create(email); s != 201 {
			t.Fatalf("create before the lock: %d %v", s, err)
		}
		acked = append(acked, email)
	}

	ctx := context.Background()
	super := c.Super(t)
	lock, err := super.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, "LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		email  string
		status int
		err    error
	}
	answers := make(chan answer, 8)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			email := fmt.Sprintf("blocked-%d@shutdown.test", i)
			s, err := create(email)
			answers <- answer{email, s, err}
		})
	}
	// SIGTERM comes while creates wait for the lock in the database.
	if waiting, ok, err := dbtest.WaitForLockWaiters(ctx, super, dbtest.AtLeast(1), 10*time.Second); err != nil || !ok {
		t.Fatalf("no create waits for the lock: %d waiting, %v", waiting, err)
	}

	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- d.cmd.Wait() }()
	// /readyz turns 503 once the signal is handled, while the listener
	// still serves (for PARTNER_SHUTDOWN_DELAY): 200 only until then, and
	// never a refused connection before the 503.
	var readyz string
	if !dbtest.Until(time.Second, func() bool {
		res, err := http.Get("http://" + d.public + "/readyz")
		if err != nil {
			readyz = err.Error()
			return true
		}
		res.Body.Close()
		readyz = res.Status
		return res.StatusCode != http.StatusOK
	}) || readyz != "503 Service Unavailable" {
		t.Fatalf("/readyz after SIGTERM: %s, want 503 while the listener still serves", readyz)
	}

	// real clock: PARTNER_SHUTDOWN_DELAY and PARTNER_SHUTDOWN_TIMEOUT are
	// the subject; the process really runs them out.
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(timeout + 5*time.Second):
		t.Fatalf("still running %v after SIGTERM:\n%s", time.Since(start), d.log)
	}
	took := time.Since(start)
	t.Logf("exited %v after SIGTERM (PARTNER_SHUTDOWN_TIMEOUT=%s): %v", took, timeout, exitErr)
	if took > timeout+500*time.Millisecond { // what a loaded machine's scheduler may add
		t.Errorf("exited %v after SIGTERM, want within %v", took, timeout)
	}
	if exitErr != nil {
		t.Errorf("exit: %v (the bound was kept by cancelling, not by the watchdog)\n%s", exitErr, d.log)
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		switch {
		case a.err != nil, a.status == http.StatusServiceUnavailable:
		case a.status == http.StatusTooManyRequests:
			// Refused before the database: half of the client's eight
			// creates wait behind its workspace's share of the pool
			// (PARTNER_DB_TENANT_CONNS) while the other half are
			// blocked; nothing was written.
		case a.status == http.StatusCreated:
			acked = append(acked, a.email)
		default:
			t.Errorf("blocked create answered %d, want 503 or a closed connection", a.status)
		}
	}
	// The cancelled statements rolled back: nothing of ours runs, and
	// once the lock is gone nothing more commits.
	// (A backend notices its client is gone a moment after the exit.)
	var running int
	if !dbtest.Until(3*time.Second, func() bool {
		if err := super.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", dbtest.Role).Scan(&running); err != nil {
			t.Fatal(err)
		}
		return running == 0
	}) {
		t.Errorf("%d sessions of the service left 3 s after it exited", running)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := super.QueryRow(ctx, "SELECT count(*) FROM contacts WHERE email = ANY($1)", acked).Scan(&n); err != nil || n != len(acked) {
		t.Errorf("%d of %d acknowledged contacts stored (%v)", n, len(acked), err)
	}
	if err := super.QueryRow(ctx, "SELECT count(*) FROM contacts").Scan(&n); err != nil || n != len(acked) {
		t.Errorf("%d contacts stored, want only the %d acknowledged", n, len(acked))
	}
}
