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
			"DATABASE_URL=postgres://nobody@127.0.0.1:1/none", "PARTNER_DATA_DIR="+t.TempDir(), "PARTNER_SECRET_KEY="+testSecretKey)
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

// TestServeSecuritySettings: the rate, proxy, issuer and pprof settings
// come from the environment, flags override them, and bad values stop
// serve before anything starts.
func TestServeSecuritySettings(t *testing.T) {
	t.Setenv("PARTNER_RATE_READ", "7")
	t.Setenv("PARTNER_RATE_WRITE", "0")
	t.Setenv("PARTNER_RATE_AUTH_FAILURES", "3")
	t.Setenv("PARTNER_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.1")
	t.Setenv("PARTNER_PUBLIC_URL", "https://api.example.com")
	t.Setenv("PARTNER_PPROF", "1")
	t.Setenv("PARTNER_ADMIN_ADDR", "127.0.0.1:0")
	c, err := serveFlags("serve", []string{"--rate-read", "9"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.serverConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits.Read != 9 || cfg.Limits.Write != 0 || cfg.Limits.AuthFailures != 3 || len(cfg.TrustedProxies) != 2 ||
		cfg.Issuer != "https://api.example.com" || !cfg.Pprof {
		t.Fatalf("config = %+v, limits %+v", cfg, *cfg.Limits)
	}
	for env, bad := range map[string]string{"PARTNER_RATE_READ": "fast", "PARTNER_RATE_WRITE": "-1"} {
		t.Setenv(env, bad)
		if _, err := serveFlags("serve", nil); err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%s: %v", env, bad, err)
		}
		t.Setenv(env, "1")
	}
	for env, bad := range map[string]string{"PARTNER_TRUSTED_PROXIES": "10.0.0.0/99", "PARTNER_PUBLIC_URL": "api.example.com/"} {
		t.Setenv(env, bad)
		c, err := serveFlags("serve", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.serverConfig(); err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%s: %v", env, bad, err)
		}
		t.Setenv(env, "")
	}
}
