package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestInterpretUnavailable: every way PostgreSQL says "not now" is
// ErrUnavailable, so it is answered 503, while request errors keep their
// meaning. A PostgreSQL error inside a connect error was once taken for a
// request error and answered 500.
func TestInterpretUnavailable(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code} }
	// A real connect error: nothing listens on port 1. (Refusals with a
	// SQLSTATE at connect, 57P03 and 53300, are provoked for real in
	// service/server's fault tests.)
	_, refused := pgconn.Connect(context.Background(), "postgres://x@127.0.0.1:1/x?connect_timeout=2")
	for name, err := range map[string]error{
		"starting up (57P03) in a statement":    fmt.Errorf("query: %w", pg("57P03")),
		"admin shutdown (57P01)":                pg("57P01"),
		"crash shutdown (57P02)":                pg("57P02"),
		"query canceled (57014)":                pg("57014"),
		"connection failure (08006)":            pg("08006"),
		"out of memory (53200)":                 pg("53200"),
		"io error (58030)":                      pg("58030"),
		"lock not available (55P03)":            pg("55P03"),
		"deadlock (40P01)":                      pg("40P01"),
		"serialization failure (40001)":         pg("40001"),
		"refused":                               refused,
		"connection reset mid-request":          fmt.Errorf("receive message: %w", &net.OpError{Op: "read", Err: errors.New("reset")}),
		"unexpected EOF mid-request":            fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF),
		"already mapped":                        fmt.Errorf("%w: x", ErrUnavailable),
		"closed network connection mid-request": fmt.Errorf("write: %w", net.ErrClosed),
	} {
		if got := interpret(err); !errors.Is(got, ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, got)
		}
	}
	for name, err := range map[string]error{
		"syntax error (42601)":   pg("42601"),
		"check violation":        pg("23514"),
		"division by zero":       pg("22012"),
		"caller canceled":        fmt.Errorf("query: %w", context.Canceled),
		"caller deadline passed": fmt.Errorf("query: %w", context.DeadlineExceeded),
	} {
		if got := interpret(err); errors.Is(got, ErrUnavailable) {
			t.Errorf("%s: %v, want it not to be ErrUnavailable", name, got)
		}
	}
	if got := interpret(pgx.ErrNoRows); got != ErrNotFound {
		t.Errorf("no rows: %v", got)
	}
}

// TestInterpretOurDeadlines: a deadline of ours (statement timeout,
// request budget) is ErrUnavailable and not a context error, which would
// be answered 504; the caller's own deadline stays a context error.
func TestInterpretOurDeadlines(t *testing.T) {
	t.Parallel()
	d := &DB{}
	ours, cancel := context.WithTimeoutCause(context.Background(), 0, errStatementTimeout)
	defer cancel()
	<-ours.Done()
	got := d.interpret(ours, nil, fmt.Errorf("query: %w", context.DeadlineExceeded))
	if !errors.Is(got, ErrUnavailable) || errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("statement timeout: %v, want ErrUnavailable and no context error", got)
	}
	budget, cancel2 := WithBudget(context.Background(), 0)
	defer cancel2()
	<-budget.Done()
	if got := d.interpret(budget, nil, fmt.Errorf("query: %w", context.DeadlineExceeded)); !errors.Is(got, ErrUnavailable) {
		t.Errorf("request budget: %v, want ErrUnavailable", got)
	}
	theirs, cancel3 := context.WithTimeout(context.Background(), 0)
	defer cancel3()
	<-theirs.Done()
	if got := d.interpret(theirs, nil, fmt.Errorf("query: %w", context.DeadlineExceeded)); errors.Is(got, ErrUnavailable) ||
		!errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("caller's deadline: %v, want a context error", got)
	}
}
