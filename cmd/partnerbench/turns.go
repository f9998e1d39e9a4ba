package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svat/partnerapi/db/pgserver"
)

// An A/B in turns compares two servers that are both up at once, each on
// a database of its own, by measuring them one after the other many
// times (ref, cur; cur, ref; ref, cur; ...) and taking the median of the
// turns' ratios. The two cores are shared with other tenants of the VM: a
// pair measured once, one after the other, moved by ±0.1 from run to run,
// and a single turn moves by ±0.2; the two measurements of a turn are next
// to each other in time, the order alternates so that neither server
// always comes first after the other's work, and the median leaves out
// the turns another tenant disturbed. Scenario (i) and the write lines
// against the previous release use it.

// abSide is one server of an A/B: its process, the request its load
// sends, and the name of a CPU profile of its first turn (with -profile;
// "" for none). A side without a server is skipped.
type abSide struct {
	srv     *serverProc
	mk      request
	profile string
}

// abTurns says how an A/B in turns is run.
type abTurns struct {
	client      *http.Client
	concurrency int
	turns       int
	// warm and d are each measurement's warm-up and measured time.
	warm, d time.Duration
	// want is the status every request must get; perRequest is how many
	// records one request carries (throughput counts records).
	want, perRequest int
	pg               *pgserver.Server
	profileDir       string
}

// abResult is an A/B measured in turns.
type abResult struct {
	// ref and cur over all turns: rps is the mean of the turns', errors
	// and requests the sums, latencies the worst turn's.
	ref, cur result
	// refCPU and curCPU are the CPU time of each side's turns, warm-ups
	// included: server is the measured server's, baseline the other
	// server's (up and idle meanwhile), postgres the cluster's, client the
	// load generator's.
	refCPU, curCPU cpuSplit
	// refMachine and curMachine are the whole machine's CPU (/proc/stat)
	// during each side's turns: what was left idle.
	refMachine, curMachine machineCPU
	// refTurns and curTurns are the throughput of each turn, ratios
	// cur/ref of each turn in order; median is the line.
	refTurns, curTurns, ratios []float64
	median                     float64
}

// run measures ref and cur t.turns times each, in turns, ref first in
// the first turn.
func (t abTurns) run(ctx context.Context, ref, cur abSide) (abResult, error) {
	var r abResult
	measure := func(s, other abSide, turn int, sum *result, cpu *cpuSplit, m *machineCPU, turns *[]float64) error {
		if s.srv == nil {
			return nil
		}
		stop := func() {}
		if turn == 0 && s.profile != "" {
			stop = profileServer(t.profileDir, s.srv, s.profile, t.warm, t.d-time.Second)
		}
		m0, c0 := machineNow(), cpuNow(s.srv.pid(), other.srv.pid(), t.pg)
		res, err := load(ctx, t.client, t.concurrency, t.warm, t.d, t.want, s.mk)
		*cpu = cpu.add(cpuNow(s.srv.pid(), other.srv.pid(), t.pg).sub(c0))
		*m = m.add(machineNow().sub(m0))
		stop()
		if err != nil {
			return err
		}
		res.rps *= float64(t.perRequest)
		*sum = sum.add(res)
		*turns = append(*turns, res.rps)
		return nil
	}
	for turn := range t.turns {
		measureRef := func() error { return measure(ref, cur, turn, &r.ref, &r.refCPU, &r.refMachine, &r.refTurns) }
		measureCur := func() error { return measure(cur, ref, turn, &r.cur, &r.curCPU, &r.curMachine, &r.curTurns) }
		first, second := measureRef, measureCur
		if turn%2 == 1 {
			first, second = measureCur, measureRef
		}
		if err := first(); err != nil {
			return r, err
		}
		if err := second(); err != nil {
			return r, err
		}
	}
	if n := len(r.refTurns); n > 0 {
		r.ref.rps /= float64(n)
	}
	if n := len(r.curTurns); n > 0 {
		r.cur.rps /= float64(n)
	}
	if len(r.refTurns) == len(r.curTurns) && len(r.refTurns) > 0 {
		r.ratios = make([]float64, len(r.refTurns))
		for i := range r.refTurns {
			r.ratios[i] = r.curTurns[i] / r.refTurns[i]
		}
		r.median = median(r.ratios)
	}
	return r, nil
}

// median is the middle of xs, the mean of the two middle ones when there
// is an even number: with an even number of turns each order (ref first,
// cur first) counts as often.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// byOrder is the median of the turns' ratios where ref ran first (the
// even turns) and of those where cur ran first: far apart, the order
// matters (what the one before left behind).
func (r abResult) byOrder() (refFirst, curFirst float64) {
	var a, b []float64
	for i, x := range r.ratios {
		if i%2 == 0 {
			a = append(a, x)
		} else {
			b = append(b, x)
		}
	}
	return median(a), median(b)
}

// cpuPerRequest is the server's and PostgreSQL's CPU per request of one
// side, in µs, warm-ups included.
func cpuPerRequest(c cpuSplit, all int64) (server, postgres float64) {
	if all <= 0 {
		return 0, 0
	}
	return float64(c.server.Microseconds()) / float64(all), float64(c.postgres.Microseconds()) / float64(all)
}

// cpuRatio is ref's CPU per request (server + PostgreSQL) over cur's:
// what the throughput ratio would be if the two cores were the bound.
func (r abResult) cpuRatio() float64 {
	rs, rp := cpuPerRequest(r.refCPU, r.ref.all)
	cs, cp := cpuPerRequest(r.curCPU, r.cur.all)
	if cs+cp == 0 {
		return 0
	}
	return (rs + rp) / (cs + cp)
}

// describe prints each side's throughput, CPU per request and what the
// machine left idle, and the two ratios, under a name.
func (r abResult) describe(name, refName, curName, unit string) string {
	var b strings.Builder
	side := func(label string, res result, cpu cpuSplit, m machineCPU) {
		s, p := cpuPerRequest(cpu, res.all)
		fmt.Fprintf(&b, "  %-28s %7.0f %s, p99 %s; CPU µs/req: server %.0f + postgres %.0f = %.0f, the other server (idle) %s; machine idle %.0f%%, steal %.0f%%\n",
			label, res.rps, unit, ms(res.p99), s, p, s+p, perRequest(cpu.baseline, res.all), m.idleShare()*100, m.stealShare()*100)
	}
	refFirst, curFirst := r.byOrder()
	fmt.Fprintf(&b, "%s, %d turns, %s / %s per turn: %.2f; median %.2f (%s first: %.2f, %s first: %.2f)\n",
		name, len(r.ratios), curName, refName, r.ratios, r.median, refName, refFirst, curName, curFirst)
	side(curName, r.cur, r.curCPU, r.curMachine)
	side(refName, r.ref, r.refCPU, r.refMachine)
	fmt.Fprintf(&b, "  throughput %s/%s %.2f (median of turns); CPU per request (server + postgres) %s/%s %.2f\n",
		curName, refName, r.median, refName, curName, r.cpuRatio())
	return b.String()
}

// pid is the server's process id, 0 for none.
func (p *serverProc) pid() int {
	if p == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (a cpuSplit) add(b cpuSplit) cpuSplit {
	return cpuSplit{a.server + b.server, a.postgres + b.postgres, a.client + b.client, a.baseline + b.baseline}
}

// machineCPU is the whole machine's CPU time from /proc/stat, in clock
// ticks, all CPUs together: busy (user, nice, system, irq, softirq), idle
// (idle, iowait) and steal (taken by the hypervisor for other guests).
type machineCPU struct{ busy, idle, steal int64 }

func machineNow() machineCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineCPU{}
	}
	v := make([]int64, 8)
	for i := range v {
		v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
	}
	// user nice system idle iowait irq softirq steal
	return machineCPU{busy: v[0] + v[1] + v[2] + v[5] + v[6], idle: v[3] + v[4], steal: v[7]}
}

func (a machineCPU) sub(b machineCPU) machineCPU {
	return machineCPU{a.busy - b.busy, a.idle - b.idle, a.steal - b.steal}
}

func (a machineCPU) add(b machineCPU) machineCPU {
	return machineCPU{a.busy + b.busy, a.idle + b.idle, a.steal + b.steal}
}

func (a machineCPU) idleShare() float64 {
	if t := a.busy + a.idle + a.steal; t > 0 {
		return float64(a.idle) / float64(t)
	}
	return 0
}

func (a machineCPU) stealShare() float64 {
	if t := a.busy + a.idle + a.steal; t > 0 {
		return float64(a.steal) / float64(t)
	}
	return 0
}

// profileServer takes a CPU profile of srv for d after delay into
// dir/name.pprof when dir is set; the returned func waits for it.
func profileServer(dir string, srv *serverProc, name string, delay, d time.Duration) func() {
	if dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(delay)
		data, err := getURL(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", srv.admin, max(1, int(d.Seconds()))))
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
			return
		}
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(filepath.Join(dir, name+".pprof"), data, 0o644)
	}()
	return func() { <-done }
}
