// Package server assembles the service: the Connect handlers behind one
// interceptor chain, the google.api.http transcoder and REST gateway,
// reflection, health and readiness, on a public and an admin listener.
package server

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"connectrpc.com/vanguard"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/gen/partner/identity/v1/identityv1connect"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/gen/partner/token/v1/tokenv1connect"
	"github.com/svat/partnerapi/internal/api/admin"
	"github.com/svat/partnerapi/internal/api/contact"
	"github.com/svat/partnerapi/internal/api/identity"
	"github.com/svat/partnerapi/internal/api/lead"
	"github.com/svat/partnerapi/internal/api/token"
	"github.com/svat/partnerapi/internal/apierror"
	"github.com/svat/partnerapi/internal/auth"
	"github.com/svat/partnerapi/internal/idempotency"
	"github.com/svat/partnerapi/internal/jsoncodec"
	"github.com/svat/partnerapi/internal/listing"
	"github.com/svat/partnerapi/internal/requestid"
	"github.com/svat/partnerapi/internal/restgw"
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
	// Issuer overrides the issuer URL of the authorization server metadata;
	// by default it is derived from each request.
	Issuer string
	// TokenStore overrides the token lookup (tests count its calls; the
	// cache wraps it).
	TokenStore auth.Store
	// NoTokenCache turns the in-process token cache off.
	NoTokenCache bool
}

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

	cfg      Config
	migrated atomic.Bool
}

// PublicServices are the services of the public listener, found by their
// generated names so that a file gaining a service cannot shift them.
var PublicServices = []protoreflect.ServiceDescriptor{
	serviceDescriptor(tokenv1connect.TokenServiceName),
	serviceDescriptor(identityv1connect.IdentityServiceName),
	serviceDescriptor(contactv1connect.ContactServiceName),
	serviceDescriptor(leadv1connect.LeadServiceName),
}

// serviceDescriptor looks a generated service up in the registry its
// package registered it in.
func serviceDescriptor(name string) protoreflect.ServiceDescriptor {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		panic(fmt.Sprintf("find service %s: %v", name, err))
	}
	return d.(protoreflect.ServiceDescriptor)
}

// New assembles the handlers.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, Usage: &usage.Recorder{DB: cfg.DB, Log: cfg.Log}, Tokens: &token.Writer{DB: cfg.DB}}
	store := cfg.TokenStore
	if store == nil {
		store = auth.DBStore{DB: cfg.DB}
	}
	var syncer auth.Syncer = noSync{}
	var clients auth.ClientStore = auth.DBStore{DB: cfg.DB}
	if !cfg.NoTokenCache {
		s.Cache = &auth.Cache{Store: store, Clients: clients, Pool: cfg.DB.Pool, Log: cfg.Log}
		store, clients, syncer = s.Cache, s.Cache, s.Cache
	}
	authn := &auth.Authenticator{Store: store, Now: cfg.Now, Usage: s.Usage}
	reqs, err := auth.Requirements(PublicServices...)
	if err != nil {
		return nil, err
	}
	key, err := serverKey(ctx, cfg.DB, "cursor")
	if err != nil {
		return nil, err
	}
	cursors := listing.NewCursors(key)

	opts := connect.WithHandlerOptions(
		connect.WithInterceptors(errorInterceptor(cfg.Log), authn.Interceptor(reqs)),
		connect.WithReadMaxBytes(restgw.MaxBodyBytes),
		connect.WithRecover(recoverPanic(cfg.Log)),
		connect.WithCodec(jsoncodec.Codec{}),
		connect.WithCompressMinBytes(compressMinBytes),
		connect.WithCompression("gzip", newGzipReader, newGzipWriter),
	)
	services := []*vanguard.Service{
		vanguard.NewService(tokenv1connect.NewTokenServiceHandler(&token.Service{DB: cfg.DB, Clients: clients, Now: cfg.Now, Usage: s.Usage, Sync: syncer, Writer: s.Tokens}, opts)),
		vanguard.NewService(identityv1connect.NewIdentityServiceHandler(identity.Service{}, opts)),
		vanguard.NewService(contactv1connect.NewContactServiceHandler(&contact.Service{DB: cfg.DB, Cursors: cursors}, opts)),
		vanguard.NewService(leadv1connect.NewLeadServiceHandler(&lead.Service{DB: cfg.DB, Cursors: cursors}, opts)),
	}
	transcoder, err := vanguard.NewTranscoder(services, vanguard.WithCodec(jsoncodec.Strict))
	if err != nil {
		return nil, fmt.Errorf("create transcoder: %w", err)
	}

	mux := http.NewServeMux()
	names := make([]string, 0, len(PublicServices))
	for _, sd := range PublicServices {
		names = append(names, string(sd.FullName()))
	}
	reflector := grpcreflect.NewStaticReflector(names...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker(names...)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.metadata)
	mux.Handle("/", restgw.New(transcoder, PublicServices...))
	s.Public = requestid.Middleware(mux)

	adminPath, adminHandler := adminv1connect.NewAdminServiceHandler(&admin.Service{DB: cfg.DB, Sync: syncer},
		connect.WithInterceptors(errorInterceptor(cfg.Log), adminTokenInterceptor(cfg.AdminToken)),
		connect.WithReadMaxBytes(restgw.MaxBodyBytes),
		connect.WithRecover(recoverPanic(cfg.Log)),
		connect.WithCodec(jsoncodec.Codec{}),
	)
	adminTranscoder, err := vanguard.NewTranscoder([]*vanguard.Service{vanguard.NewService(adminPath, adminHandler)}, vanguard.WithCodec(jsoncodec.Strict))
	if err != nil {
		return nil, fmt.Errorf("create admin transcoder: %w", err)
	}
	adminMux := http.NewServeMux()
	adminReflector := grpcreflect.NewStaticReflector(adminv1connect.AdminServiceName)
	adminMux.Handle(grpcreflect.NewHandlerV1(adminReflector))
	adminMux.Handle(grpcreflect.NewHandlerV1Alpha(adminReflector))
	adminMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	// Profiles, for docs/performance.md; loopback-only like the rest of the
	// admin listener, and behind the admin token when one is set.
	adminMux.Handle("/debug/pprof/", requireAdminToken(cfg.AdminToken, http.HandlerFunc(pprof.Index)))
	adminMux.Handle("/debug/pprof/profile", requireAdminToken(cfg.AdminToken, http.HandlerFunc(pprof.Profile)))
	adminMux.Handle("/", adminTranscoder)
	s.Admin = requestid.Middleware(adminMux)
	return s, nil
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

func newGzipReader() connect.Decompressor { return &gzip.Reader{} }

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
// the request id. No request data, and so no credential, is logged.
func errorInterceptor(log *slog.Logger) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, err := next(ctx, req)
			if err == nil {
				return res, nil
			}
			if errors.Is(err, db.ErrUnavailable) || errors.Is(err, db.ErrRetry) {
				err = &apierror.Error{Code: apierror.CodeUnavailable, Message: "the database is unavailable; retry later", Cause: err}
			}
			ce := apierror.ToConnect(err)
			switch ce.Code() {
			case connect.CodeInternal, connect.CodeUnknown, connect.CodeUnavailable, connect.CodeDataLoss:
				log.ErrorContext(ctx, "request failed", "procedure", req.Spec().Procedure,
					"request_id", requestid.FromContext(ctx), "err", err)
			}
			return nil, ce
		}
	})
}

func recoverPanic(log *slog.Logger) func(context.Context, connect.Spec, http.Header, any) error {
	return func(ctx context.Context, spec connect.Spec, _ http.Header, p any) error {
		log.ErrorContext(ctx, "handler panicked", "procedure", spec.Procedure, "request_id", requestid.FromContext(ctx), "panic", fmt.Sprint(p))
		return apierror.ToConnect(apierror.Internal(fmt.Errorf("panic: %v", p)))
	}
}

// adminTokenInterceptor requires "Authorization: Bearer <token>" on every
// admin call when token is set.
func adminTokenInterceptor(token string) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if !adminTokenOK(token, req.Header().Get("Authorization")) {
				return nil, &apierror.Error{Code: apierror.CodeUnauthenticated,
					Message: "the admin API needs Authorization: Bearer <PARTNER_ADMIN_TOKEN>", Challenge: `Bearer realm="partner-admin"`}
			}
			return next(ctx, req)
		}
	})
}

// adminTokenOK reports whether an Authorization header carries the admin
// token, compared in constant time. With no token configured, any call
// passes.
func adminTokenOK(token, authorization string) bool {
	if token == "" {
		return true
	}
	got, _ := auth.BearerToken(authorization)
	return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

func requireAdminToken(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !adminTokenOK(token, r.Header.Get("Authorization")) {
			writeText(w, http.StatusUnauthorized, "admin token required")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readyz answers 200 when the database answers and every migration is
// applied.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.DB.Pool.Ping(ctx); err != nil {
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

// metadata is the RFC 8414 authorization server metadata.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	issuer := s.cfg.Issuer
	if issuer == "" {
		scheme := "http"
		if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
			scheme = "https"
		}
		issuer = scheme + "://" + r.Host
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
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}

// Run runs the background work (token cache listener, token batching,
// usage flushing, idempotency key sweeping) until ctx ends, and returns
// once all of it has stopped, after the last usage flush, so the caller
// may close the pool.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Usage.Run(ctx) }()
	if s.Cache != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.Cache.Listen(ctx) }()
	}
	s.Tokens.Run(ctx)
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := idempotency.Sweep(ctx, s.cfg.DB); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("sweep idempotency keys", "err", err)
		} else if n > 0 {
			s.cfg.Log.Info("swept idempotency keys", "deleted", n)
		}
		select {
		case <-ctx.Done():
			wg.Wait()
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

// Serve serves both listeners until ctx ends, then shuts them down
// gracefully, letting requests in flight finish.
func (s *Server) Serve(ctx context.Context, public, adminL net.Listener) error {
	servers := []*http.Server{NewHTTPServer(s.Public, s.cfg.Log), NewHTTPServer(s.Admin, s.cfg.Log)}
	listeners := []net.Listener{public, adminL}
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	bgDone := make(chan struct{})
	go func() { s.Run(bg); close(bgDone) }()

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(shutdownCtx)
	}
	stopBG()
	<-bgDone
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
