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
