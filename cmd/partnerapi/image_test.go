package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTheImagesBinaryIsStatic builds the binary with the Dockerfile's
// command from docs/operations.md and checks what the distroless image
// needs of it: statically linked (no interpreter, no shared library), it
// prints the version it was given, and it refuses to serve, with a clear
// message and promptly, when its database cannot be reached (issue 24,
// item 10). There is no Docker daemon here to build the image itself.
func TestTheImagesBinaryIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	docker := markdownBlock(t, "../../docs/operations.md", "dockerfile", "")
	var build string
	for _, line := range strings.Split(docker, "\n") {
		if strings.HasPrefix(line, "RUN CGO_ENABLED=0 go build") {
			build = strings.TrimPrefix(line, "RUN ")
		}
	}
	if build == "" {
		t.Fatalf("the Dockerfile has no `RUN CGO_ENABLED=0 go build` line:\n%s", docker)
	}
	out := filepath.Join(t.TempDir(), "out")
	script := strings.NewReplacer("/out/partnerapi", out+"/partnerapi", "${VERSION}", "v9.9.9-test").Replace(build)
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, b)
	}
	bin := filepath.Join(out, "partnerapi")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary asks for a dynamic loader: it cannot run in a distroless static image")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the binary needs shared libraries %v", libs)
	}
	if code, stdout, stderr := run1(t, bin, "version"); code != 0 || !strings.Contains(stdout, "v9.9.9-test") {
		t.Fatalf("version: exit %d, %q %q", code, stdout, stderr)
	}

	serve := exec.Command(bin, "serve")
	serve.Env = append(os.Environ(), "DATABASE_URL=postgres://nobody@127.0.0.1:1/none?connect_timeout=1",
		"PARTNER_HTTP_ADDR=127.0.0.1:0", "PARTNER_ADMIN_ADDR=127.0.0.1:0", "PARTNER_SECRET_KEY="+testSecretKey)
	start := time.Now()
	b, err := serve.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "database") {
		t.Fatalf("serve without a reachable database: %v\n%s", err, b)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("serve took %v to give up on an unreachable database", d)
	}
}

// TestTheSystemdUnitVerifies: docs/operations.md's unit passes
// `systemd-analyze verify` (when the machine has systemd).
func TestTheSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze")
	}
	dir := t.TempDir()
	unit := filepath.Join(dir, "partnerapi.service")
	// The unit names /usr/local/bin/partnerapi; verify checks that the
	// executables exist, so point it at a real file.
	body := strings.ReplaceAll(markdownBlock(t, "../../docs/operations.md", "ini", ""), "/usr/local/bin/partnerapi", "/bin/true")
	if err := os.WriteFile(unit, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	// verify also reports unrelated units of the host; only lines about
	// this unit count.
	var ours []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "partnerapi.service") {
			ours = append(ours, line)
		}
	}
	if len(ours) > 0 {
		t.Fatalf("systemd-analyze verify (%v):\n%s", err, strings.Join(ours, "\n"))
	}
}
