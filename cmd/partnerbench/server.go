package main

import (
	"context"
	"flag"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// baselineServer serves the baselines in their own process, on a pool
// sized like the service's.
func baselineServer(args []string) error {
	fs := flag.NewFlagSet("baseline-server", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	dbURL := fs.String("database-url", "", "PostgreSQL URL")
	ws := fs.String("workspace", "", "workspace uuid")
	me := fs.String("me", "{}", "the JSON of GET /api/v1/me")
	_ = fs.Parse(args)
	ctx, stop := signalContext()
	defer stop()
	cfg, err := pgxpool.ParseConfig(*dbURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	id, err := uuid.Parse(*ws)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: *addr, Handler: baselines(pool, []byte(*me), id)}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}
