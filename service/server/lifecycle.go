package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/internal/records/idempotency"
	"github.com/svat/partnerapi/internal/work/retention"
	"github.com/svat/partnerapi/service/webhook/secrets"
)

// readyz answers 200 when the database answers and every migration is
// applied.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeText(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.DB.Ping(ctx); err != nil {
		writeText(w, http.StatusServiceUnavailable, "database unreachable")
		return
	}
	if !s.migrated.Load() {
		pending, err := db.Pending(ctx, s.cfg.DB)
		if err != nil || pending {
			writeText(w, http.StatusServiceUnavailable, "migrations pending")
			return
		}
		s.migrated.Store(true)
	}
	writeText(w, http.StatusOK, "ok")
}

// Run runs the background work until ctx ends: the token cache's feed,
// token and lead create grouping, usage flushing, webhook deliveries, and
// the hourly sweeps of
// idempotency keys, expired tokens and old audit events. One errgroup owns
// every goroutine; Run returns once all of them have stopped, after the
// last usage flush and the last token and lead groups, so the caller may
// close the pool.
func (s *Server) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { s.Usage.Run(ctx); return nil })
	if s.Cache != nil {
		g.Go(func() error { return s.Cache.Run(ctx) })
	}
	g.Go(func() error { return s.Tokens.Run(ctx) })
	g.Go(func() error { return s.Leads.Run(ctx) })
	g.Go(func() error { s.sweep(ctx); return nil })
	g.Go(func() error { s.Webhooks.Run(ctx); return nil })
	return g.Wait()
}

// sweep deletes expired idempotency keys, expired tokens, old audit
// events and old events of the feed hourly, each bounded per run, and
// seals the webhook secrets that need it (secrets.Sweep: written by
// release 1.1.0, under an older key, or with a plaintext copy no longer
// kept).
func (s *Server) sweep(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := idempotency.Sweep(ctx, s.cfg.DB); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("sweep idempotency keys", "err", err)
		} else if n > 0 {
			s.cfg.Log.Info("swept idempotency keys", "deleted", n)
		}
		if n, unopened, err := secrets.Sweep(ctx, s.cfg.DB, secrets.Box{Keys: s.cfg.SecretKeys}); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("seal webhook secrets", "err", err)
		} else if n > 0 || unopened > 0 {
			s.cfg.Log.Info("sealed webhook secrets", "sealed", n, "unopened", unopened)
		}
		if r, err := retention.Sweep(ctx, s.cfg.DB, s.cfg.Now(), s.cfg.EventRetention); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("sweep expired tokens, old audit events and old events", "err", err)
		} else if r.Tokens+r.AuditEvents+r.Events > 0 {
			s.cfg.Log.Info("swept expired tokens, old audit events and old events",
				"tokens", r.Tokens, "audit_events", r.AuditEvents, "events", r.Events)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// NewHTTPServer returns an http.Server with explicit timeouts that speaks
// HTTP/1.1 and cleartext HTTP/2 (for gRPC).
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           h,
		Protocols:         &protocols,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// Serve serves both listeners until ctx ends, then shuts down as an
// orchestrator expects (docs/operations.md):
//
//  1. /readyz answers 503 at once, so the load balancer stops sending;
//  2. the listeners keep serving for ShutdownDelay;
//  3. they stop accepting and requests in flight finish;
//  4. near the end of ShutdownTimeout, requests still running have their
//     context cancelled: their statements are cancelled on the server,
//     their transactions roll back, and they answer 503 (nothing
//     acknowledged is lost: a create answers 201 only after its commit);
//  5. the background work stops (last usage flush, last token batch).
//
// Serve returns within ShutdownTimeout of ctx ending, leaving a little for
// the caller to close the pool.
func (s *Server) Serve(ctx context.Context, public, adminL net.Listener) error {
	// Requests run under reqCtx, not under ctx: they must outlive the
	// signal, and be cancelled only by the hard stop.
	reqCtx, hardStop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer hardStop(nil)
	servers := []*http.Server{NewHTTPServer(s.Public, s.cfg.Log), NewHTTPServer(s.Admin, s.cfg.Log)}
	listeners := []net.Listener{public, adminL}
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		srv.BaseContext = func(net.Listener) context.Context { return reqCtx }
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	bgDone := make(chan struct{})
	go func() { _ = s.Run(bg); close(bgDone) }()

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	start := time.Now()
	s.draining.Store(true)
	s.cfg.Log.Info("shutting down", "delay", s.cfg.ShutdownDelay.String(), "timeout", s.cfg.ShutdownTimeout.String())
	if err == nil && s.cfg.ShutdownDelay > 0 {
		select {
		case <-time.After(s.cfg.ShutdownDelay):
		case err = <-errc:
		}
	}
	// What is left after the drain: background work (a last flush and
	// batch, each bounded by the database timeouts) and closing the pool.
	reserve := min(s.cfg.ShutdownTimeout/4, 5*time.Second)
	drainCtx, cancel := context.WithDeadline(context.Background(), start.Add(s.cfg.ShutdownTimeout-reserve))
	defer cancel()
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Go(func() { _ = srv.Shutdown(drainCtx) })
	}
	wg.Wait()
	if drainCtx.Err() != nil {
		s.cfg.Log.Warn("shutdown timeout reached; cancelling the requests still running")
		hardStop(fmt.Errorf("%w: the server is shutting down", db.ErrUnavailable))
		// Cancelled statements stop within the database's cancel grace;
		// give their requests that long to answer, then close.
		graceCtx, cancel := context.WithTimeout(context.Background(), min(time.Second, reserve/2))
		for _, srv := range servers {
			wg.Go(func() { _ = srv.Shutdown(graceCtx) })
		}
		wg.Wait()
		cancel()
		for _, srv := range servers {
			_ = srv.Close()
		}
	}
	stopBG()
	select {
	case <-bgDone:
	case <-time.After(time.Until(start.Add(s.cfg.ShutdownTimeout - reserve/4))):
		s.cfg.Log.Warn("background work did not stop in time")
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
