package main

import (
	"testing"
	"time"
)

// TestServeConfigFromEnvironment: the database and shutdown settings come
// from the environment, a flag wins, and a bad value is a usage error.
func TestServeConfigFromEnvironment(t *testing.T) {
	t.Setenv("PARTNER_DB_MAX_CONNS", "5")
	t.Setenv("PARTNER_DIRECT_DATABASE_URL", "postgres://direct/db")
	t.Setenv("PARTNER_DB_STATEMENT_TIMEOUT", "1500ms")
	t.Setenv("PARTNER_SHUTDOWN_DELAY", "3")
	t.Setenv("PARTNER_SHUTDOWN_TIMEOUT", "")
	c, err := serveFlags("serve", []string{"--request-timeout", "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.maxConns != 5 || c.directURL != "postgres://direct/db" || c.statementTimeout != 1500*time.Millisecond ||
		c.shutdownDelay != 3*time.Second || c.shutdownTimeout != 25*time.Second || c.requestTimeout != 3*time.Second ||
		c.acquireTimeout != time.Second {
		t.Fatalf("config = %+v", c)
	}
	if c, err := serveFlags("serve", []string{"--db-max-conns", "9"}); err != nil || c.maxConns != 9 {
		t.Fatalf("flag over environment: %d, %v", c.maxConns, err)
	}
	t.Setenv("PARTNER_SHUTDOWN_TIMEOUT", "soon")
	if _, err := serveFlags("serve", nil); err == nil {
		t.Fatal("PARTNER_SHUTDOWN_TIMEOUT=soon accepted")
	}
	t.Setenv("PARTNER_SHUTDOWN_TIMEOUT", "")
	t.Setenv("PARTNER_DB_MAX_CONNS", "0")
	if _, err := serveFlags("serve", nil); err == nil {
		t.Fatal("PARTNER_DB_MAX_CONNS=0 accepted")
	}
}

// TestServeConfigRefusesNonsense: a timeout of 0 or less, a negative
// delay or pool size is a usage error, from the environment or a flag.
// (PARTNER_SHUTDOWN_TIMEOUT=0 armed the exit watchdog with 0: the process
// exited 1 at the signal, with nothing drained, while the server defaulted
// to 25 s; a negative --db-max-conns silently meant the default.)
func TestServeConfigRefusesNonsense(t *testing.T) {
	for _, v := range []string{"PARTNER_DB_ACQUIRE_TIMEOUT", "PARTNER_DB_STATEMENT_TIMEOUT", "PARTNER_REQUEST_TIMEOUT", "PARTNER_SHUTDOWN_TIMEOUT"} {
		t.Setenv(v, "0")
		if _, err := serveFlags("serve", nil); err == nil {
			t.Errorf("%s=0 accepted", v)
		}
		t.Setenv(v, "")
	}
	for _, args := range [][]string{
		{"--shutdown-timeout", "0s"}, {"--shutdown-timeout", "-1s"}, {"--request-timeout", "0"},
		{"--db-acquire-timeout", "-5ms"}, {"--db-statement-timeout", "0s"}, {"--shutdown-delay", "-1s"},
		{"--db-max-conns", "-3"},
	} {
		if _, err := serveFlags("serve", args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if c, err := serveFlags("serve", []string{"--shutdown-delay", "0s", "--shutdown-timeout", "1s"}); err != nil || c.shutdownTimeout != time.Second {
		t.Errorf("a zero delay and a 1 s timeout: %+v %v", c, err)
	}
}

// TestWebhookMaxPendingFromEnvironment: PARTNER_WEBHOOK_MAX_PENDING sets
// the backlog bound (100,000 without it), --webhook-max-pending wins over
// it, and a bound that is not a positive number (or does not fit the
// database's int) is a usage error; the bound reaches the server's config.
func TestWebhookMaxPendingFromEnvironment(t *testing.T) {
	t.Setenv("PARTNER_WEBHOOK_MAX_PENDING", "")
	if c, err := serveFlags("serve", nil); err != nil || c.webhookMaxPending != 100_000 {
		t.Fatalf("default: %d, %v", c.webhookMaxPending, err)
	}
	t.Setenv("PARTNER_WEBHOOK_MAX_PENDING", "500")
	c, err := serveFlags("serve", nil)
	if err != nil || c.webhookMaxPending != 500 {
		t.Fatalf("from the environment: %d, %v", c.webhookMaxPending, err)
	}
	if sc, err := c.serverConfig(); err != nil || sc.WebhookMaxPending != 500 {
		t.Fatalf("server config: %d, %v", sc.WebhookMaxPending, err)
	}
	if c, err := serveFlags("serve", []string{"--webhook-max-pending", "70"}); err != nil || c.webhookMaxPending != 70 {
		t.Fatalf("flag over environment: %d, %v", c.webhookMaxPending, err)
	}
	for _, v := range []string{"0", "-1", "lots", "3000000000"} {
		t.Setenv("PARTNER_WEBHOOK_MAX_PENDING", v)
		if _, err := serveFlags("serve", nil); err == nil {
			t.Errorf("PARTNER_WEBHOOK_MAX_PENDING=%s accepted", v)
		}
	}
	t.Setenv("PARTNER_WEBHOOK_MAX_PENDING", "")
	c, err = serveFlags("serve", []string{"--webhook-max-pending", "0"})
	if err == nil {
		_, err = c.serverConfig()
	}
	if err == nil {
		t.Error("--webhook-max-pending 0 accepted")
	}
}
