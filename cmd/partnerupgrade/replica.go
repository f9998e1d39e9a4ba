package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// replica is one `partnerapi serve` process of one of the two releases.
type replica struct {
	name    string // A, B, …: in the order they started
	release string // "old" or "new"
	public  string // host:port of the public listener
	admin   string // host:port of the admin listener
	log     string // its stdout and stderr

	cmd      *exec.Cmd
	exited   chan struct{}
	stopping atomic.Bool  // SIGTERM sent: its exit is expected
	inflight atomic.Int64 // requests of the load it is serving
}

func (r *replica) String() string { return r.name + " (" + r.release + ")" }

// startReplica starts bin serve and waits until /readyz answers 200: the
// replica has migrated (or found nothing to migrate) and serves.
func startReplica(ctx context.Context, name, release, bin, logPath string, env []string) (*replica, error) {
	r := &replica{name: name, release: release, public: freeAddr(), admin: freeAddr(), log: logPath}
	r.cmd = exec.Command(bin, "serve")
	r.cmd.Env = append(env, "PARTNER_HTTP_ADDR="+r.public, "PARTNER_ADMIN_ADDR="+r.admin)
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log of replica %s: %w", r, err)
	}
	r.cmd.Stdout, r.cmd.Stderr = f, f
	// A process group of its own: a terminal's ^C reaches only this
	// program, which stops the replicas itself.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start replica %s: %w", r, err)
	}
	r.exited = make(chan struct{})
	go func() { _ = r.cmd.Wait(); f.Close(); close(r.exited) }()
	err = until(ctx, 60*time.Second, func() bool {
		if r.gone() {
			return true
		}
		res, err := http.Get("http://" + r.public + "/readyz")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == http.StatusOK
	})
	if r.gone() {
		return r, fmt.Errorf("start replica %s: it exited (%v):\n%s", r, r.cmd.ProcessState, tailFile(logPath, 8))
	}
	if err != nil {
		return r, fmt.Errorf("start replica %s: not ready: %w\n%s", r, err, tailFile(logPath, 8))
	}
	return r, nil
}

// gone tells whether the process has exited.
func (r *replica) gone() bool {
	select {
	case <-r.exited:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits for the exit, which must be clean and
// within the replica's shutdown timeout (10 s) plus a margin.
func (r *replica) stop() (time.Duration, error) {
	start := time.Now()
	r.stopping.Store(true)
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("signal replica %s: %w", r, err)
	}
	select {
	case <-r.exited:
	case <-time.After(20 * time.Second):
		r.kill()
		return time.Since(start), fmt.Errorf("stop replica %s: still running 20 s after SIGTERM", r)
	}
	if !r.cmd.ProcessState.Success() {
		return time.Since(start), fmt.Errorf("stop replica %s: %v after SIGTERM", r, r.cmd.ProcessState)
	}
	return time.Since(start), nil
}

// kill ends the process at once, whatever it is doing: the clean-up of a
// run that failed.
func (r *replica) kill() {
	if r.cmd != nil && r.cmd.Process != nil && r.exited != nil && !r.gone() {
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// unexpectedExit describes an exit nobody asked for, or is empty.
func (r *replica) unexpectedExit() string {
	if r.exited == nil || !r.gone() || r.stopping.Load() {
		return ""
	}
	return fmt.Sprintf("replica %s exited by itself (%v)", r, r.cmd.ProcessState)
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// until polls ok every 50 ms until it holds, limit passes or ctx ends.
func until(ctx context.Context, limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %v", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// tailFile is the last n lines of a log, indented, for an error message.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// errorLines are the lines of a replica's log at level ERROR (the JSON
// log's "level":"ERROR"): a 500 is always logged there with its cause.
func errorLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for line := range bytes.Lines(b) {
		if bytes.Contains(line, []byte(`"level":"ERROR"`)) || bytes.HasPrefix(line, []byte("panic:")) {
			out = append(out, strings.TrimSpace(string(line)))
		}
	}
	return out
}

var errNoReplica = errors.New("no replica in the rotation")
