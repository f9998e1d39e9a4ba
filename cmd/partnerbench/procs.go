package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svat/partnerapi/db/pgserver"
	"github.com/svat/partnerapi/db/procenv"
)

// serverEnv names what the server under test takes from this process's
// environment: the Go runtime's knobs and the tracing exporter's
// settings. Everything it is configured with is set explicitly; nothing
// else of the operator's shell (a PARTNER_DIRECT_DATABASE_URL, a token)
// reaches it (db/procenv).
var serverEnv = []string{"GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG", "GOTRACEBACK", "OTEL_*", "PARTNER_PG_BINDIR"}

// syncBuffer collects a child process's output; it is safe to read while
// the process writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serverProc is a running `partnerapi serve`.
type serverProc struct {
	cmd *exec.Cmd
	log *syncBuffer
	// base is the public listener's URL, admin the admin listener's address.
	base, admin string
}

// startServer runs the real binary against databaseURL with its listeners
// on port 0, reads the chosen addresses from its "serving" log line (no
// port is chosen first and bound later, so nothing can take it in
// between) and waits for /readyz. env adds or overrides variables.
func startServer(ctx context.Context, bin, databaseURL string, env ...string) (*serverProc, error) {
	p := &serverProc{log: &syncBuffer{}}
	p.cmd = exec.CommandContext(ctx, bin, "serve")
	p.cmd.Env = procenv.Env(serverEnv, "DATABASE_URL="+databaseURL, "PARTNER_HTTP_ADDR=127.0.0.1:0",
		"PARTNER_ADMIN_ADDR=127.0.0.1:0", "PARTNER_ADMIN_TOKEN=", "PARTNER_SECRET_KEY="+secretKey)
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (run `make build` first): %w", bin, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if p.base == "" {
			if public, admin := servingAddrs(p.log.String()); public != "" {
				p.base, p.admin = "http://"+public, admin
			}
		}
		if p.base != "" && waitReady(p.base+"/readyz", time.Second) == nil {
			return p, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("partnerapi serve not ready within 60 s:\n%s", tailString(p.log.String()))
}

// stop sends SIGTERM and waits.
func (p *serverProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}

// servingAddrs finds the listener addresses in serve's JSON log.
func servingAddrs(log string) (public, admin string) {
	for _, line := range strings.Split(log, "\n") {
		var rec struct{ Msg, Public, Admin string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving" {
			return rec.Public, rec.Admin
		}
	}
	return "", ""
}

// getRequest builds GET u with header pairs.
func getRequest(u string, hdr ...string) request {
	return func(int64) (*http.Request, error) {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		for i := 0; err == nil && i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return req, err
	}
}

// procStatus reads a size field of /proc/PID/status ("VmRSS:", "VmHWM:")
// in bytes, or 0.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// fastRate is the bench clients' own read and write rate: the limiter
// stays on (its cost is part of every measurement) but never refuses.
var fastRate int32 = 1_000_000

// clockTick is the unit of the times in /proc/PID/stat (USER_HZ), 100 Hz
// on Linux.
const clockTick = 10 * time.Millisecond

// cpuTime is the user and system CPU time pid has used, with that of its
// children it has reaped when children is set.
func cpuTime(pid int, children bool) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid …: comm may hold spaces, so read after ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// After ")": state(0) … utime(11) stime(12) cutime(13) cstime(14).
	if len(f) < 15 {
		return 0
	}
	n := 0
	fields := []int{11, 12}
	if children {
		fields = append(fields, 13, 14)
	}
	for _, k := range fields {
		v, _ := strconv.Atoi(f[k])
		n += v
	}
	return time.Duration(n) * clockTick
}

// cpuSplit is the CPU time used so far by the processes of a run.
type cpuSplit struct{ server, postgres, client, baseline time.Duration }

func (a cpuSplit) sub(b cpuSplit) cpuSplit {
	return cpuSplit{a.server - b.server, a.postgres - b.postgres, a.client - b.client, a.baseline - b.baseline}
}

// cpuNow reads the CPU time of the server, PostgreSQL (the postmaster, the
// backends it reaped and those alive), the load generator (this process)
// and the baseline server.
func cpuNow(server, baseline int, pg *pgserver.Server) cpuSplit {
	c := cpuSplit{server: cpuTime(server, false), client: cpuTime(os.Getpid(), false), baseline: cpuTime(baseline, false)}
	c.postgres = cpuTime(pg.PID(), true)
	for _, pid := range pg.Backends() {
		c.postgres += cpuTime(pid, false)
	}
	return c
}

// perRequest renders CPU time per request in microseconds.
func perRequest(d time.Duration, n int64) string {
	if n <= 0 {
		return "-"
	}
	return strconv.FormatInt(d.Microseconds()/n, 10)
}
