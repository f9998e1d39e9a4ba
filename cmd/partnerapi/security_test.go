package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestServeRefusesAnExposedAdminListenerWithoutToken: serve stops at once,
// saying why, when the admin listener would be reachable from other hosts
// and no admin token guards it.
func TestServeRefusesAnExposedAdminListenerWithoutToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, "serve")
		cmd.Env = append(os.Environ(), "PARTNER_ADMIN_ADDR="+addr, "PARTNER_ADMIN_TOKEN=", "PARTNER_HTTP_ADDR=127.0.0.1:0",
			"DATABASE_URL=postgres://nobody@127.0.0.1:1/none", "PARTNER_DATA_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || cmd.ProcessState.ExitCode() == 0 {
			t.Fatalf("serve with admin on %s and no token started: %s", addr, out)
		}
		if msg := string(out); !strings.Contains(msg, "PARTNER_ADMIN_TOKEN") || !strings.Contains(msg, "not loopback") {
			t.Fatalf("serve with admin on %s: the message does not say why: %s", addr, out)
		}
	}
}
