// Package server assembles the service: the Connect handlers behind one
// interceptor chain, the google.api.http transcoder and REST gateway,
// reflection, health and readiness, on a public and an admin listener.
package server

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"connectrpc.com/otelconnect"
	"connectrpc.com/vanguard"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/gen/openapi"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/gen/partner/identity/v1/identityv1connect"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/gen/partner/token/v1/tokenv1connect"
	"github.com/svat/partnerapi/internal/api"
	"github.com/svat/partnerapi/internal/api/admin"
	"github.com/svat/partnerapi/internal/api/contact"
	"github.com/svat/partnerapi/internal/api/identity"
	"github.com/svat/partnerapi/internal/api/lead"
	"github.com/svat/partnerapi/internal/api/token"
	"github.com/svat/partnerapi/internal/apierror"
	"github.com/svat/partnerapi/internal/auth"
	"github.com/svat/partnerapi/internal/gate"
	"github.com/svat/partnerapi/internal/idempotency"
	"github.com/svat/partnerapi/internal/jsoncodec"
	"github.com/svat/partnerapi/internal/listing"
	"github.com/svat/partnerapi/internal/metrics"
	"github.com/svat/partnerapi/internal/observe"
	"github.com/svat/partnerapi/internal/ratelimit"
	"github.com/svat/partnerapi/internal/reqbody"
	"github.com/svat/partnerapi/internal/requestid"
	"github.com/svat/partnerapi/internal/restgw"
	"github.com/svat/partnerapi/internal/retention"
	"github.com/svat/partnerapi/internal/scope"
	"github.com/svat/partnerapi/internal/usage"
)

// Config is what the server needs.
type Config struct {
	DB  *db.DB
	Log *slog.Logger
	// Now is the clock of token issuance and expiry. Tests inject one.
	Now func() time.Time
	// AdminToken, when set, must be sent as a bearer token on every admin
	// call.
	AdminToken string
	// Issuer is the public base URL (PARTNER_PUBLIC_URL): the issuer of
	// the authorization server metadata, never the request's Host. When
	// empty, the issuer is derived from each request and the metadata is
	// not cacheable.
	Issuer string
	// Limits are the default rate limits; nil means
	// ratelimit.DefaultConfig().
	Limits *ratelimit.Config
	// TrustedProxies are the peers whose X-Forwarded-For is believed when
	// finding a request's source address (PARTNER_TRUSTED_PROXIES).
	TrustedProxies []netip.Prefix
	// Pprof serves /debug/pprof on the admin listener even without an
	// admin token (PARTNER_PPROF); with a token it is always served,
	// behind the token.
	Pprof bool
	// TokenStore overrides the token lookup (tests count its calls; the
	// cache wraps it).
	TokenStore auth.Store
	// NoTokenCache turns the in-process token cache off.
	NoTokenCache bool
	// TracerProvider makes the request and database spans; nil turns
	// tracing off (see observe.TracerProviderFromEnv).
	TracerProvider trace.TracerProvider
	// RequestTimeout bounds the database work of one request; past it the
	// request is answered 503. Default 4 s: every failure mode of the
	// database is answered within 5 s.
	RequestTimeout time.Duration
	// ShutdownDelay is how long the listeners keep serving after the
	// shutdown signal, with /readyz answering 503 (the load balancer's
	// deregistration time). Default 0.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the whole shutdown: requests still running
	// near its end have their database work cancelled. Default 25 s.
	ShutdownTimeout time.Duration
}

// DefaultRequestTimeout and DefaultShutdownTimeout are the defaults of
// [Config].
const (
	DefaultRequestTimeout  = 4 * time.Second
	DefaultShutdownTimeout = 25 * time.Second
)

// Server is the assembled service.
type Server struct {
	// Public serves REST, Connect, gRPC and gRPC-Web, reflection, health.
	Public http.Handler
	// Admin serves the management service.
	Admin http.Handler
	// Usage batches last-used times; Run flushes it.
	Usage *usage.Recorder
	// Cache is the token cache, nil when disabled; Run keeps its listener.
	Cache *auth.Cache
	// Tokens batches token inserts; Run starts it.
	Tokens *token.Writer
	// Leads groups single lead creates; Run starts it.
	Leads *lead.Writer
	// Limits holds the rate limit buckets.
	Limits *ratelimit.Limiter
	// REST is the public REST gateway.
	REST *restgw.Gateway

	cfg      Config
	migrated atomic.Bool
	// draining is set when shutdown begins: /readyz answers 503 from then.
	draining atomic.Bool
}

// PublicServices are the services of the public listener (see
// [api.PublicServices]).
var PublicServices = api.PublicServices

// New assembles the handlers.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	s := &Server{cfg: cfg, Usage: &usage.Recorder{DB: cfg.DB, Log: cfg.Log}, Tokens: &token.Writer{DB: cfg.DB},
		Leads: &lead.Writer{DB: cfg.DB}}
	store := cfg.TokenStore
	if store == nil {
		store = auth.DBStore{DB: cfg.DB, Log: cfg.Log}
	}
	var syncer auth.Syncer = noSync{}
	var clients auth.ClientStore = auth.DBStore{DB: cfg.DB, Log: cfg.Log}
	if !cfg.NoTokenCache {
		s.Cache = &auth.Cache{Store: store, Clients: clients, DB: cfg.DB, Log: cfg.Log}
		store, clients, syncer = s.Cache, s.Cache, s.Cache
	}
	authn := &auth.Authenticator{Store: store, Now: cfg.Now, Usage: s.Usage}
	reqs, err := auth.Requirements(PublicServices...)
	if err != nil {
		return nil, err
	}
	limits := ratelimit.DefaultConfig()
	if cfg.Limits != nil {
		limits = *cfg.Limits
	}
	s.Limits = ratelimit.New(limits)
	key, err := serverKey(ctx, cfg.DB, "cursor")
	if err != nil {
		return nil, err
	}
	cursors := listing.NewCursors(key)

	obs := &observe.Observer{Log: cfg.Log, Tracer: cfg.TracerProvider, Listener: "public"}
	first, err := firstInterceptors(cfg.TracerProvider)
	if err != nil {
		return nil, err
	}
	// The interceptors of every public RPC, outermost first; the REST
	// gateway's in-process calls run the same chain.
	interceptors := append(first, errorInterceptor(cfg.Log, cfg.RequestTimeout), authn.Interceptor(reqs),
		undecodableInterceptor(oauthProcedures), cleanTextInterceptor(reqs, bodyFields(PublicServices)),
		recoverInterceptor(recoverPanic(cfg.Log)))
	opts := connect.WithHandlerOptions(
		connect.WithInterceptors(interceptors...),
		connect.WithCodec(decodeLater{jsoncodec.Codec{}}),
		connect.WithCodec(decodeLater{protoCodec{}}),
		connect.WithCompressMinBytes(compressMinBytes),
		bounded,
	)
	tokens := &token.Service{DB: cfg.DB, Clients: clients, Now: cfg.Now,
		Usage: s.Usage, Sync: syncer, Writer: s.Tokens, Limits: s.Limits, Log: cfg.Log}
	identities := identity.Service{}
	contacts := &contact.Service{DB: cfg.DB, Cursors: cursors}
	leads := &lead.Service{DB: cfg.DB, Cursors: cursors, Writer: s.Leads}
	// Connect, gRPC and gRPC-Web requests go straight to the Connect
	// handlers, which speak all three; the transcoder only serves REST
	// routes without an in-process call (none today) and unknown paths.
	rpc := http.NewServeMux()
	var services []*vanguard.Service
	for _, h := range []rpcHandler{
		handler(tokenv1connect.NewTokenServiceHandler(tokens, opts)),
		handler(identityv1connect.NewIdentityServiceHandler(identities, opts)),
		handler(contactv1connect.NewContactServiceHandler(contacts, opts)),
		handler(leadv1connect.NewLeadServiceHandler(leads, opts)),
	} {
		rpc.Handle(h.path, h.handler)
		services = append(services, vanguard.NewService(h.path, h.handler))
	}
	transcoder, err := vanguard.NewTranscoder(services, vanguard.WithCodec(jsoncodec.Strict), boundedTranscoding)
	if err != nil {
		return nil, fmt.Errorf("create transcoder: %w", err)
	}
	rpc.Handle("/", transcoder)
	g := &gate.Gate{Authn: authn, Limits: s.Limits, Reqs: reqs, Sources: ratelimit.Sources{Trusted: cfg.TrustedProxies}, Classify: classifier(cfg.Log)}

	mux := http.NewServeMux()
	names := make([]string, 0, len(PublicServices))
	for _, sd := range PublicServices {
		names = append(names, string(sd.FullName()))
	}
	reflector := grpcreflect.NewStaticReflector(names...)
	mux.Handle(streams(grpcreflect.NewHandlerV1(reflector, bounded)))
	mux.Handle(streams(grpcreflect.NewHandlerV1Alpha(reflector, bounded)))
	healthPath, health := grpchealth.NewHandler(grpchealth.NewStaticChecker(names...), bounded)
	mux.Handle(healthPath, gate.GRPCNeedsHTTP2(health))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET "+metadataPath, s.metadata)
	// RFC 8414 §3.1: the metadata of an issuer with a path is at the
	// well-known path followed by the issuer's path.
	mux.HandleFunc("GET "+metadataPath+"/", s.metadata)
	mux.HandleFunc("GET /openapi.json", serveOpenAPI)
	// REST: the gateway matches the route, the gate checks credentials and
	// limits, then the gateway reads (and inflates) the body. RPC: the gate
	// checks, then a whole body sent with Content-Encoding is inflated,
	// bounded, before the transcoder.
	gw := restgw.New(g.RPC(reqbody.Bound(rpc, gate.WriteError)), PublicServices...)
	gw.Check = g.Check
	gw.CompressMinBytes = compressMinBytes
	gw.Direct(directCalls(tokens, identities, contacts, leads), interceptors...)
	s.REST = gw
	mux.Handle("/", gw)
	s.Public = requestid.Middleware(obs.Middleware(reqbody.Cap(mux)))

	adminPath, adminHandler := adminv1connect.NewAdminServiceHandler(&admin.Service{DB: cfg.DB, Sync: syncer},
		connect.WithInterceptors(append(first, errorInterceptor(cfg.Log, cfg.RequestTimeout), undecodableInterceptor(nil))...),
		connect.WithRecover(recoverPanic(cfg.Log)),
		connect.WithCodec(decodeLater{jsoncodec.Codec{}}),
		connect.WithCodec(decodeLater{protoCodec{}}),
		bounded,
	)
	adminTranscoder, err := vanguard.NewTranscoder([]*vanguard.Service{vanguard.NewService(adminPath, adminHandler)},
		vanguard.WithCodec(jsoncodec.Strict), boundedTranscoding)
	if err != nil {
		return nil, fmt.Errorf("create admin transcoder: %w", err)
	}
	adminMux := http.NewServeMux()
	adminReflector := grpcreflect.NewStaticReflector(adminv1connect.AdminServiceName)
	adminMux.Handle(streams(grpcreflect.NewHandlerV1(adminReflector, bounded)))
	adminMux.Handle(streams(grpcreflect.NewHandlerV1Alpha(adminReflector, bounded)))
	adminMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	// Profiles reveal much about the process: served only behind the admin
	// token, or when the operator opted in (PARTNER_PPROF) on a listener
	// that is then loopback-only (see CheckAdminAddr).
	if cfg.AdminToken != "" || cfg.Pprof {
		adminMux.HandleFunc("/debug/pprof/", pprof.Index)
		adminMux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	adminMux.Handle("GET /metrics", metrics.Handler(metrics.PoolRegistry(cfg.DB)))
	// The admin token is checked before any body is read (and guards
	// /metrics and pprof too); then bodies are bounded and inflated like on
	// the public listener.
	adminMux.Handle("/", cleanPath(adminQuery(reqbody.Bound(adminTranscoder, gate.WriteError))))
	adminObs := &observe.Observer{Log: cfg.Log, Tracer: cfg.TracerProvider, Listener: "admin"}
	s.Admin = requestid.Middleware(adminObs.Middleware(reqbody.Cap(requireAdminToken(cfg.AdminToken, cfg.Log, ratelimit.Sources{Trusted: cfg.TrustedProxies}, adminMux))))
	return s, nil
}

// firstInterceptors run before any other: the one that names the route
// and the auth failure for the access log, and the RPC span when tracing.
func firstInterceptors(tp trace.TracerProvider) ([]connect.Interceptor, error) {
	out := []connect.Interceptor{observe.Interceptor()}
	if tp == nil {
		return out, nil
	}
	otel, err := otelconnect.NewInterceptor(otelconnect.WithTracerProvider(tp), otelconnect.WithoutMetrics(),
		otelconnect.WithPropagator(propagation.TraceContext{}))
	if err != nil {
		return nil, fmt.Errorf("create tracing interceptor: %w", err)
	}
	return append(out, otel), nil
}

// serveOpenAPI serves the OpenAPI document of the REST surface, generated
// from the protos (gen/openapi, see internal/apidoc). It is public.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openapi.JSON)
}

// compressMinBytes keeps small responses uncompressed: gzip of a 300-byte
// answer costs more CPU than the whole rest of the request and saves
// nothing on the wire. Pages of contacts and leads are larger and still
// compressed for clients that accept gzip.
const compressMinBytes = 8 << 10

// newGzipWriter compresses at gzip.BestSpeed: a page of 100 contacts
// shrinks about as much as at the default level for a third of the CPU.
func newGzipWriter() connect.Compressor {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}

type noSync struct{}

func (noSync) Sync(context.Context) {}

// serverKey returns the named shared secret, creating it on first start.
func serverKey(ctx context.Context, d *db.DB, name string) ([]byte, error) {
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh)
	key, err := db.Q.ServerKeyEnsure(ctx, d.Conn(), dbsqlc.ServerKeyEnsureParams{Name: name, Key: fresh})
	if err != nil {
		return nil, fmt.Errorf("load %s key: %w", name, err)
	}
	return key, nil
}

// errorInterceptor is the single exit of every handler error: infrastructure
// errors are classified, everything becomes a Connect error through
// apierror.ToConnect, and failures the caller cannot fix are logged with
// the request id. No request data, and so no credential, is logged. It
// also gives the request its database time budget: a database that does
// not answer in time, like one that cannot be reached, is 503.
func errorInterceptor(log *slog.Logger, budget time.Duration) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			ctx, cancel := db.WithBudget(ctx, budget)
			defer cancel()
			res, err := next(ctx, req)
			if err == nil {
				return res, nil
			}
			err = unavailable(ctx, err)
			ce := apierror.ToConnect(err)
			if req.Peer().Protocol == connect.ProtocolGRPC {
				// HTTP/2 forbids WWW-Authenticate as a trailer, where gRPC
				// puts error metadata; net/http would drop it with a
				// warning. ErrorInfo carries the same reason.
				ce.Meta().Del("Www-Authenticate")
			}
			switch ce.Code() {
			case connect.CodeInternal, connect.CodeUnknown, connect.CodeUnavailable, connect.CodeDataLoss:
				log.ErrorContext(ctx, "request failed", "procedure", req.Spec().Procedure,
					"request_id", requestid.FromContext(ctx), "err", err)
			}
			return nil, ce
		}
	})
}

// unavailable turns a database outage, or the request's own database
// budget running out (not the caller's deadline), into the 503 domain
// error; any other error passes unchanged. The error interceptor and the
// gate's classifier both use it, so a database failure is 503 wherever
// it is met.
func unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		if cause := context.Cause(ctx); errors.Is(cause, db.ErrUnavailable) {
			err = fmt.Errorf("%w: %v", cause, err)
		}
	}
	if errors.Is(err, db.ErrBusy) {
		// The workspace's own concurrent requests hold its share of the
		// pool: its load, not an outage.
		metrics.RateLimited.WithLabelValues("database").Inc()
		return &apierror.Error{Code: apierror.CodeRateLimited,
			Message:    "too many concurrent requests of this workspace are using the database; retry later",
			RetryAfter: "1", Cause: err}
	}
	if errors.Is(err, db.ErrUnavailable) || errors.Is(err, db.ErrRetry) {
		return &apierror.Error{Code: apierror.CodeUnavailable, Message: "the database is unavailable; retry later",
			RetryAfter: "1", Cause: err}
	}
	return err
}

func recoverPanic(log *slog.Logger) func(context.Context, connect.Spec, http.Header, any) error {
	return func(ctx context.Context, spec connect.Spec, _ http.Header, p any) error {
		log.ErrorContext(ctx, "handler panicked", "procedure", spec.Procedure, "request_id", requestid.FromContext(ctx), "panic", fmt.Sprint(p))
		return apierror.ToConnect(apierror.Internal(fmt.Errorf("panic: %v", p)))
	}
}

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

// metadataPath is where RFC 8414 puts the metadata of an issuer without
// a path.
const metadataPath = "/.well-known/oauth-authorization-server"

// metadata is the RFC 8414 authorization server metadata, at metadataPath
// and, when the issuer has a path, at metadataPath followed by it.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	if p, ip := r.URL.EscapedPath(), issuerPath(s.cfg.Issuer); p != metadataPath && (ip == "" || p != metadataPath+ip) {
		writeText(w, http.StatusNotFound, "Not Found")
		return
	}
	issuer, cache := s.cfg.Issuer, "public, max-age=3600"
	if issuer == "" {
		// Derived from the request, so it says whatever the caller's Host
		// says: a shared cache must never keep it for someone else.
		scheme := "http"
		if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
			scheme = "https"
		}
		issuer, cache = scheme+"://"+r.Host, "no-store"
	}
	issuer = strings.TrimSuffix(issuer, "/")
	methods := []string{"client_secret_basic", "client_secret_post"}
	body, _ := json.Marshal(map[string]any{
		"issuer":                                     issuer,
		"token_endpoint":                             issuer + "/api/oauth/token",
		"revocation_endpoint":                        issuer + "/api/oauth/revoke",
		"grant_types_supported":                      []string{"client_credentials"},
		"response_types_supported":                   []string{},
		"token_endpoint_auth_methods_supported":      methods,
		"revocation_endpoint_auth_methods_supported": methods,
		"scopes_supported":                           scope.Names(),
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", cache)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// issuerPath is the path of a configured issuer without its final "/",
// or "" when it has none.
func issuerPath(issuer string) string {
	u, err := url.Parse(issuer)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.EscapedPath(), "/")
}

func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}

// Run runs the background work until ctx ends: the token cache's feed,
// token and lead create grouping, usage flushing, and the hourly sweeps of
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
	return g.Wait()
}

// sweep deletes expired idempotency keys, expired tokens and old audit
// events hourly, each bounded per run.
func (s *Server) sweep(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := idempotency.Sweep(ctx, s.cfg.DB); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("sweep idempotency keys", "err", err)
		} else if n > 0 {
			s.cfg.Log.Info("swept idempotency keys", "deleted", n)
		}
		if r, err := retention.Sweep(ctx, s.cfg.DB, s.cfg.Now()); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("sweep expired tokens and old audit events", "err", err)
		} else if r.Tokens+r.AuditEvents > 0 {
			s.cfg.Log.Info("swept expired tokens and old audit events", "tokens", r.Tokens, "audit_events", r.AuditEvents)
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

// oauthProcedures are the RPCs whose malformed input is RFC 6749's
// invalid_request, as on /api/oauth.
var oauthProcedures = map[string]bool{
	tokenv1connect.TokenServiceCreateTokenProcedure: true,
	tokenv1connect.TokenServiceRevokeTokenProcedure: true,
}

// rpcHandler is what a generated handler constructor returns.
type rpcHandler struct {
	path    string
	handler http.Handler
}

func handler(path string, h http.Handler) rpcHandler { return rpcHandler{path, h} }

// directCalls are the public RPCs the REST gateway calls in process,
// without the transcoder (restgw.Direct): every REST route of the public
// services. A method missing here is still served, through the
// transcoder.
func directCalls(tokens tokenv1connect.TokenServiceHandler, identities identityv1connect.IdentityServiceHandler,
	contacts contactv1connect.ContactServiceHandler, leads leadv1connect.LeadServiceHandler) map[string]restgw.Call {
	return map[string]restgw.Call{
		tokenv1connect.TokenServiceCreateTokenProcedure:             restgw.Method(tokens.CreateToken),
		tokenv1connect.TokenServiceRevokeTokenProcedure:             restgw.Method(tokens.RevokeToken),
		identityv1connect.IdentityServiceGetMeProcedure:             restgw.Method(identities.GetMe),
		contactv1connect.ContactServiceListContactsProcedure:        restgw.Method(contacts.ListContacts),
		contactv1connect.ContactServiceCreateContactProcedure:       restgw.Method(contacts.CreateContact),
		contactv1connect.ContactServiceGetContactProcedure:          restgw.Method(contacts.GetContact),
		contactv1connect.ContactServiceUpdateContactProcedure:       restgw.Method(contacts.UpdateContact),
		contactv1connect.ContactServiceBatchCreateContactsProcedure: restgw.Method(contacts.BatchCreateContacts),
		leadv1connect.LeadServiceListLeadsProcedure:                 restgw.Method(leads.ListLeads),
		leadv1connect.LeadServiceCreateLeadProcedure:                restgw.Method(leads.CreateLead),
		leadv1connect.LeadServiceGetLeadProcedure:                   restgw.Method(leads.GetLead),
		leadv1connect.LeadServiceUpdateLeadProcedure:                restgw.Method(leads.UpdateLead),
		leadv1connect.LeadServiceBatchCreateLeadsProcedure:          restgw.Method(leads.BatchCreateLeads),
	}
}

// recoverInterceptor turns a handler's panic into the error handle
// returns, as connect.WithRecover does; being an interceptor of our own, it
// also guards the REST gateway's in-process calls.
func recoverInterceptor(handle func(context.Context, connect.Spec, http.Header, any) error) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (_ connect.AnyResponse, err error) {
			defer func() {
				if p := recover(); p != nil {
					if p == http.ErrAbortHandler { //nolint:errorlint // net/http compares with ==
						panic(p)
					}
					err = handle(ctx, req.Spec(), req.Header(), p)
				}
			}()
			return next(ctx, req)
		}
	})
}
