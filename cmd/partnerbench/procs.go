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
)

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
	p.cmd.Env = append(os.Environ(), "DATABASE_URL="+databaseURL, "PARTNER_HTTP_ADDR=127.0.0.1:0",
		"PARTNER_ADMIN_ADDR=127.0.0.1:0", "PARTNER_ADMIN_TOKEN=")
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
