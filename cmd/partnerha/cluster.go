package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db/pgserver"
	"github.com/svat/partnerapi/db/procenv"
)

// timing is Patroni's: the leader key lives TTL seconds, the HA loop
// runs every LoopWait seconds, and a DCS or PostgreSQL call is retried for
// RetryTimeout seconds. loop_wait + 2 × retry_timeout must not exceed ttl.
type timing struct{ TTL, LoopWait, RetryTimeout int }

// cluster is etcd, three Patroni nodes and HAProxy, all on free ports
// under one directory, all run as children of this process.
type cluster struct {
	dir      string
	etcd     *exec.Cmd
	etcdAddr string
	nodes    []*node
	haproxy  *exec.Cmd
	haAddr   string
	superPw  string
	appPw    string
	postgres *syscall.Credential
	bindir   string
	timing   timing
}

// node is one Patroni agent and the PostgreSQL it manages.
type node struct {
	name     string
	dir      string
	pgAddr   string
	restAddr string
	config   string
	cmd      *exec.Cmd
	exited   chan struct{}
}

const appRole = "partnerapi"

func startCluster(ctx context.Context, dir string, t timing) (*cluster, error) {
	if t.LoopWait+2*t.RetryTimeout > t.TTL {
		return nil, fmt.Errorf("patroni timing %+v: loop_wait + 2 × retry_timeout exceeds ttl", t)
	}
	bindir, err := pgserver.BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential("postgres")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, postgres: cred, bindir: bindir, superPw: secret(), appPw: secret(), timing: t}
	if err := c.startEtcd(ctx); err != nil {
		return c, err
	}
	for i := 1; i <= 3; i++ {
		n := &node{name: fmt.Sprintf("node%d", i), dir: filepath.Join(dir, fmt.Sprintf("node%d", i)), pgAddr: freeAddr(), restAddr: freeAddr()}
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			return c, err
		}
		if err := os.Chown(n.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return c, err
		}
		n.config = filepath.Join(n.dir, "patroni.yml")
		if err := os.WriteFile(n.config, []byte(c.patroniConfig(n)), 0o600); err != nil {
			return c, err
		}
		if err := os.Chown(n.config, int(cred.Uid), int(cred.Gid)); err != nil {
			return c, err
		}
		c.nodes = append(c.nodes, n)
	}
	// The first node bootstraps alone; the others then clone it, so no two
	// race for the initialize key and the run is repeatable.
	if err := c.startPatroni(c.nodes[0]); err != nil {
		return c, err
	}
	if _, err := c.waitLeader(ctx, "", 90*time.Second); err != nil {
		return c, err
	}
	for _, n := range c.nodes[1:] {
		if err := c.startPatroni(n); err != nil {
			return c, err
		}
	}
	if err := c.waitHealthy(ctx, 180*time.Second); err != nil {
		return c, err
	}
	if err := c.startHAProxy(); err != nil {
		return c, err
	}
	return c, c.createAppRole(ctx)
}

func (c *cluster) startEtcd(ctx context.Context) error {
	c.etcdAddr = freeAddr()
	peer := freeAddr()
	c.etcd = exec.Command("etcd", "--name", "e1", "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", "http://"+c.etcdAddr, "--advertise-client-urls", "http://"+c.etcdAddr,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "e1=http://"+peer, "--enable-v2=true")
	c.etcd.Env = procenv.Env(nil)
	if err := startLogged(c.etcd, filepath.Join(c.dir, "etcd.log")); err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	return until(ctx, 30*time.Second, "etcd to answer", func() bool {
		res, err := http.Get("http://" + c.etcdAddr + "/v2/keys/")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == 200
	})
}

// patroniConfig is the node's patroni.yml: the etcd: section (the v2 API),
// synchronous_mode_strict, primary_start_timeout 0, pg_rewind and slots.
func (c *cluster) patroniConfig(n *node) string {
	return fmt.Sprintf(`scope: partnerha
name: %[1]s
log:
  level: INFO
restapi:
  listen: %[2]s
  connect_address: %[2]s
etcd:
  host: %[3]s
bootstrap:
  dcs:
    ttl: %[4]d
    loop_wait: %[5]d
    retry_timeout: %[6]d
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: true
    primary_start_timeout: 0
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_connections: 200
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
  initdb:
    - encoding: UTF8
    - locale: C
    - data-checksums
postgresql:
  listen: %[7]s
  connect_address: %[7]s
  data_dir: %[8]s/data
  bin_dir: %[9]s
  pgpass: %[8]s/pgpass
  authentication:
    superuser:
      username: postgres
      password: %[10]s
    replication:
      username: replicator
      password: %[10]s
    rewind:
      username: rewinder
      password: %[10]s
  parameters:
    unix_socket_directories: %[8]s
    logging_collector: "on"
    log_directory: %[8]s/log
    log_min_messages: warning
    log_min_error_statement: warning
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
`, n.name, n.restAddr, c.etcdAddr, c.timing.TTL, c.timing.LoopWait, c.timing.RetryTimeout, n.pgAddr, n.dir, c.bindir, c.superPw)
}

func (c *cluster) startPatroni(n *node) error {
	n.cmd = exec.Command("setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "patroni", n.config)
	n.cmd.Env = procenv.Env(nil, "HOME="+n.dir, "LANG=C.UTF-8", "LC_ALL=C.UTF-8")
	n.cmd.Dir = n.dir
	if err := startLogged(n.cmd, filepath.Join(c.dir, n.name+".log")); err != nil {
		return fmt.Errorf("start patroni %s: %w", n.name, err)
	}
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, ch chan struct{}) { _ = cmd.Wait(); close(ch) }(n.cmd, n.exited)
	return nil
}

func (c *cluster) startHAProxy() error {
	c.haAddr = freeAddr()
	var servers strings.Builder
	for _, n := range c.nodes {
		_, restPort, _ := net.SplitHostPort(n.restAddr)
		fmt.Fprintf(&servers, "    server %s %s maxconn 200 check port %s\n", n.name, n.pgAddr, restPort)
	}
	cfg := fmt.Sprintf(`global
    maxconn 1000

defaults
    mode tcp
    retries 2
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 1s

listen postgres_primary
    bind %s
    option httpchk OPTIONS /primary
    http-check expect status 200
    default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions
%s`, c.haAddr, servers.String())
	path := filepath.Join(c.dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	bin := "/usr/sbin/haproxy"
	if p, err := exec.LookPath("haproxy"); err == nil {
		bin = p
	}
	c.haproxy = exec.Command(bin, "-db", "-f", path)
	c.haproxy.Env = procenv.Env(nil)
	if err := startLogged(c.haproxy, filepath.Join(c.dir, "haproxy.log")); err != nil {
		return fmt.Errorf("start haproxy: %w", err)
	}
	// HAProxy deems every server up until its checks say otherwise (fall
	// 2 × inter 1s), so it may route to a standby in its first seconds:
	// wait until several sessions in a row reach the primary.
	inARow := 0
	return until(context.Background(), 20*time.Second, "haproxy to route only to the primary", func() bool {
		if c.isPrimary(c.haAddr) {
			inARow++
		} else {
			inARow = 0
		}
		return inARow >= 2*len(c.nodes)
	})
}

// isPrimary tells whether addr reaches a PostgreSQL that accepts writes.
func (c *cluster) isPrimary(addr string) bool {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.superURL(addr))
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var standby bool
	return conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby) == nil && !standby
}

// createAppRole does what the embedded setup does (db/pgserver): a login
// role that is not a superuser, owning its database. The service then
// migrates the schema itself.
func (c *cluster) createAppRole(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.superURL(c.haAddr))
	if err != nil {
		return fmt.Errorf("connect as superuser: %w", err)
	}
	defer conn.Close(ctx)
	for _, stmt := range []string{
		"CREATE ROLE " + appRole + " LOGIN PASSWORD '" + c.appPw + "'",
		"CREATE DATABASE " + appRole + " OWNER " + appRole,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("create role and database: %w", err)
		}
	}
	return nil
}

func (c *cluster) superURL(addr string) string {
	return "postgres://postgres:" + c.superPw + "@" + addr + "/postgres?sslmode=disable&connect_timeout=3"
}

// multiHostURL is the service's DATABASE_URL naming every node: pgx tries
// them in turn and keeps the one that accepts writes.
func (c *cluster) multiHostURL() string {
	hosts := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		hosts[i] = n.pgAddr
	}
	return "postgres://" + appRole + ":" + c.appPw + "@" + strings.Join(hosts, ",") + "/" + appRole + "?sslmode=disable&target_session_attrs=read-write"
}

// haproxyURL is the service's DATABASE_URL through HAProxy.
func (c *cluster) haproxyURL() string {
	return "postgres://" + appRole + ":" + c.appPw + "@" + c.haAddr + "/" + appRole + "?sslmode=disable"
}

// member is a node as Patroni's GET /cluster reports it.
type member struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	State    string `json:"state"`
	Timeline int    `json:"timeline"`
	Lag      any    `json:"lag"`
}

var restClient = &http.Client{Timeout: 2 * time.Second}

// members asks the nodes in turn (a frozen one does not answer) for the
// cluster's view: the members Patroni knows of in etcd.
func (c *cluster) members(skip ...*node) []member {
	for _, n := range c.nodes {
		if n.in(skip) {
			continue
		}
		res, err := restClient.Get("http://" + n.restAddr + "/cluster")
		if err != nil {
			continue
		}
		var body struct {
			Members []member `json:"members"`
		}
		err = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if err == nil {
			return body.Members
		}
	}
	return nil
}

func (n *node) in(list []*node) bool {
	for _, m := range list {
		if m == n {
			return true
		}
	}
	return false
}

func (c *cluster) node(name string) *node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// leader is the running leader as the cluster reports it, or nil.
func (c *cluster) leader(skip ...*node) *node {
	for _, m := range c.members(skip...) {
		if m.Role == "leader" && m.State == "running" {
			return c.node(m.Name)
		}
	}
	return nil
}

// waitLeader waits for a running leader other than not.
func (c *cluster) waitLeader(ctx context.Context, not string, limit time.Duration) (*node, error) {
	var l *node
	skip := []*node{}
	if n := c.node(not); n != nil {
		skip = append(skip, n)
	}
	err := until(ctx, limit, "a new leader", func() bool {
		l = c.leader(skip...)
		if l == nil || l.name == not {
			return false
		}
		return c.isPrimary(l.pgAddr) // the leader's PostgreSQL accepts writes
	})
	return l, err
}

// waitHealthy waits for a leader, a synchronous standby and a third node
// streaming, all on the leader's timeline.
func (c *cluster) waitHealthy(ctx context.Context, limit time.Duration) error {
	var last []member
	err := until(ctx, limit, "the cluster to be whole (leader, sync standby, replica)", func() bool {
		last = c.members()
		if len(last) != 3 {
			return false
		}
		var leader, sync, running int
		tl := -1
		for _, m := range last {
			switch m.Role {
			case "leader":
				leader++
				tl = m.Timeline
			case "sync_standby":
				sync++
			}
			if m.State == "running" || m.State == "streaming" {
				running++
			}
		}
		if leader != 1 || sync != 1 || running != 3 {
			return false
		}
		for _, m := range last {
			if m.Timeline != tl {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w; last seen: %+v", err, last)
	}
	return nil
}

func (c *cluster) syncStandby() *node {
	for _, m := range c.members() {
		if m.Role == "sync_standby" {
			return c.node(m.Name)
		}
	}
	return nil
}

// switchover asks Patroni for a planned switchover to the synchronous
// standby (the only candidate synchronous_mode_strict allows).
func (c *cluster) switchover(leader, candidate *node) error {
	body, _ := json.Marshal(map[string]string{"leader": leader.name, "candidate": candidate.name})
	res, err := (&http.Client{Timeout: 60 * time.Second}).Post("http://"+leader.restAddr+"/switchover", "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("switchover: %w", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return fmt.Errorf("switchover: %d %s", res.StatusCode, b)
	}
	return nil
}

// postmaster is the node's postmaster pid (first line of postmaster.pid).
func (n *node) postmaster() int {
	b, err := os.ReadFile(filepath.Join(n.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// crash kills the node as a power loss would: Patroni, the postmaster and
// every backend at once (SIGKILL).
func (n *node) crash() {
	pm := n.postmaster()
	pids := append([]int{n.cmd.Process.Pid}, descendants(n.cmd.Process.Pid)...)
	if pm != 0 {
		pids = append(pids, pm)
		pids = append(pids, descendants(pm)...)
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	<-n.exited
}

// postgresPids are the postmaster and its children (backends call setsid,
// so the process group would miss them).
func (n *node) postgresPids() []int {
	pm := n.postmaster()
	if pm == 0 {
		return nil
	}
	return append([]int{pm}, descendants(pm)...)
}

// walsenders are the node's WAL sender processes.
func (n *node) walsenders() []int {
	pm := n.postmaster()
	if pm == 0 {
		return nil
	}
	var out []int
	for _, p := range descendants(pm) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if bytes.Contains(cmdline, []byte("walsender")) {
			out = append(out, p)
		}
	}
	return out
}

// stop ends the node for good (at exit): a thawed Patroni gets 10 s to
// stop its PostgreSQL, then whatever is left is killed.
func (n *node) stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	signalAll(append([]int{n.cmd.Process.Pid}, n.postgresPids()...), syscall.SIGCONT)
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
	}
	pids := append([]int{n.cmd.Process.Pid}, descendants(n.cmd.Process.Pid)...)
	if pm := n.postmaster(); pm != 0 {
		pids = append(pids, pm)
		pids = append(pids, descendants(pm)...)
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
		_ = syscall.Kill(p, syscall.SIGCONT)
	}
	if n.exited != nil {
		select {
		case <-n.exited:
		case <-time.After(5 * time.Second):
		}
	}
}

// close kills every process the cluster started, even a frozen one.
func (c *cluster) close() {
	if c == nil {
		return
	}
	if c.haproxy != nil && c.haproxy.Process != nil {
		_ = c.haproxy.Process.Kill()
		_ = c.haproxy.Wait()
	}
	for _, n := range c.nodes {
		n.stop()
	}
	if c.etcd != nil && c.etcd.Process != nil {
		_ = c.etcd.Process.Kill()
		_ = c.etcd.Wait()
	}
}

// descendants lists every process below pid (children, theirs, …).
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after ")".
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, ch := range children[p] {
			out = append(out, ch)
			queue = append(queue, ch)
		}
	}
	return out
}

func signalAll(pids []int, sig syscall.Signal) {
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

// startLogged starts cmd with its output in a file, in a process group of
// its own (so a terminal's ^C reaches only this program, which cleans up).
func startLogged(cmd *exec.Cmd, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	return nil
}

func credential(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("partnerha runs as root: it starts Patroni as the postgres user (setpriv) and signals its processes")
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("look up user %q: %w", name, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// until polls ok every 100 ms until it holds, limit passes or ctx ends.
func until(ctx context.Context, limit time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for {
		if ok() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %v for %s", limit, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
