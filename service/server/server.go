// Package server assembles the service: the Connect handlers behind one
// interceptor chain, the REST gateway that calls the same implementations
// behind the same chain for every google.api.http route, reflection,
// health and readiness, on a public and an admin listener.
package server

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"go.opentelemetry.io/otel/trace"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/gen/partner/customfield/v1/customfieldv1connect"
	"github.com/svat/partnerapi/gen/partner/event/v1/eventv1connect"
	"github.com/svat/partnerapi/gen/partner/identity/v1/identityv1connect"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/gen/partner/token/v1/tokenv1connect"
	"github.com/svat/partnerapi/gen/partner/webhook/v1/webhookv1connect"
	"github.com/svat/partnerapi/internal/contract/routes"
	"github.com/svat/partnerapi/internal/edge/gate"
	"github.com/svat/partnerapi/internal/edge/jsoncodec"
	"github.com/svat/partnerapi/internal/edge/reqbody"
	"github.com/svat/partnerapi/internal/edge/restgw"
	"github.com/svat/partnerapi/internal/observe"
	"github.com/svat/partnerapi/internal/observe/metrics"
	"github.com/svat/partnerapi/internal/observe/requestid"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/ratelimit"
	"github.com/svat/partnerapi/internal/security/sealed"
	"github.com/svat/partnerapi/internal/webhook/outbound"
	"github.com/svat/partnerapi/internal/work/usage"
	"github.com/svat/partnerapi/service"
	"github.com/svat/partnerapi/service/admin"
	"github.com/svat/partnerapi/service/contact"
	"github.com/svat/partnerapi/service/customfield"
	"github.com/svat/partnerapi/service/event"
	"github.com/svat/partnerapi/service/identity"
	"github.com/svat/partnerapi/service/lead"
	"github.com/svat/partnerapi/service/settings"
	"github.com/svat/partnerapi/service/token"
	"github.com/svat/partnerapi/service/webhook"
	"github.com/svat/partnerapi/service/webhook/delivery"
	"github.com/svat/partnerapi/service/webhook/secrets"
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
	// WebhookAllowedNetworks are networks webhook deliveries may reach
	// although they are private (PARTNER_WEBHOOK_ALLOWED_NETWORKS).
	WebhookAllowedNetworks outbound.Networks
	// WebhookTimeout bounds one delivery attempt (PARTNER_WEBHOOK_TIMEOUT);
	// 0: 10 s.
	WebhookTimeout time.Duration
	// WebhookSchedule is the wait before each retry
	// (PARTNER_WEBHOOK_RETRY_SCHEDULE); nil: delivery.DefaultSchedule.
	WebhookSchedule []time.Duration
	// WebhookConcurrency bounds the requests in flight to one endpoint
	// (PARTNER_WEBHOOK_CONCURRENCY); 0: 8.
	WebhookConcurrency int
	// WebhookMaxPending bounds an endpoint's pending deliveries
	// (PARTNER_WEBHOOK_MAX_PENDING); 0: delivery.DefaultMaxPending.
	WebhookMaxPending int
	// WebhookRootCAs, when set, are the roots webhook receivers' TLS
	// certificates must chain to (tests); nil: the system's.
	WebhookRootCAs *x509.CertPool
	// SecretKeys seal the webhook endpoints' secrets at rest
	// (PARTNER_SECRET_KEY: the first seals, each opens). Required.
	SecretKeys *sealed.Keyring
	// EventRetention is how long events are kept
	// (PARTNER_EVENT_RETENTION); 0: event.DefaultRetention.
	EventRetention time.Duration
	// SettingsURL is the public base of the workspace settings page
	// (PARTNER_SETTINGS_URL); empty: the admin listener's own /settings.
	SettingsURL string
	// SettingsFrameAncestors is the page's CSP frame-ancestors
	// (PARTNER_SETTINGS_FRAME_ANCESTORS); empty: 'none'.
	SettingsFrameAncestors string
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
	// Webhooks delivers the event feed to webhook endpoints; Run starts it.
	Webhooks *delivery.Engine

	cfg      Config
	migrated atomic.Bool
	// draining is set when shutdown begins: /readyz answers 503 from then.
	draining atomic.Bool
}

// PublicServices are the services of the public listener (see
// [service.PublicServices]).
var PublicServices = service.PublicServices

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
	if cfg.SecretKeys == nil {
		return nil, errors.New("start server: no key to seal webhook secrets with (PARTNER_SECRET_KEY)")
	}
	box := secrets.Box{Keys: cfg.SecretKeys}
	s.Webhooks = delivery.New(delivery.Config{
		DB: cfg.DB, Cursors: cursors, Schedule: cfg.WebhookSchedule, PerEndpoint: cfg.WebhookConcurrency,
		MaxPending: cfg.WebhookMaxPending, Log: cfg.Log, Secrets: box,
		Client: outbound.New(outbound.Config{Timeout: cfg.WebhookTimeout, AllowedNetworks: cfg.WebhookAllowedNetworks, RootCAs: cfg.WebhookRootCAs}),
	})

	obs := &observe.Observer{Log: cfg.Log, Tracer: cfg.TracerProvider, Listener: "public"}
	first, err := firstInterceptors(cfg.TracerProvider)
	if err != nil {
		return nil, err
	}
	// The REST routes of each listener, read once from the google.api.http
	// annotations: the gateway serves them, the clean-text check names
	// their body fields.
	publicRoutes := routes.Of(PublicServices...)
	// The interceptors of every public RPC, outermost first; the REST
	// gateway's calls run the same chain.
	interceptors := slices.Concat(first, []connect.Interceptor{errorInterceptor(cfg.Log, cfg.RequestTimeout), authn.Interceptor(reqs),
		undecodableInterceptor(oauthProcedures), cleanTextInterceptor(reqs, bodyFields(publicRoutes)),
		recoverInterceptor(recoverPanic(cfg.Log)), wakeInterceptor(s.Webhooks.Wake)})
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
	events := &event.Service{DB: cfg.DB, Cursors: cursors, Retention: cfg.EventRetention, Now: cfg.Now}
	webhooks := &webhook.Service{DB: cfg.DB, Cursors: cursors, Events: events, Allowed: cfg.WebhookAllowedNetworks,
		Tester: s.Webhooks, OnChange: s.Webhooks.Changed, Now: cfg.Now, Sources: ratelimit.Sources{Trusted: cfg.TrustedProxies},
		Secrets: box}
	fields := &customfield.Service{DB: cfg.DB, Sources: ratelimit.Sources{Trusted: cfg.TrustedProxies}}
	// Connect, gRPC and gRPC-Web requests go straight to the Connect
	// handlers, which speak all three.
	rpc := http.NewServeMux()
	for _, h := range []rpcHandler{
		handler(tokenv1connect.NewTokenServiceHandler(tokens, opts)),
		handler(identityv1connect.NewIdentityServiceHandler(identities, opts)),
		handler(contactv1connect.NewContactServiceHandler(contacts, opts)),
		handler(leadv1connect.NewLeadServiceHandler(leads, opts)),
		handler(eventv1connect.NewEventServiceHandler(events, opts)),
		handler(webhookv1connect.NewWebhookServiceHandler(webhooks, opts)),
		handler(customfieldv1connect.NewCustomFieldServiceHandler(fields, opts)),
	} {
		rpc.Handle(h.path, h.handler)
	}
	rpc.HandleFunc("/", notFound)
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
	metadata := token.Metadata{Issuer: cfg.Issuer}
	mux.Handle("GET "+token.MetadataPath, metadata)
	// RFC 8414 §3.1: the metadata of an issuer with a path is at the
	// well-known path followed by the issuer's path.
	mux.Handle("GET "+token.MetadataPath+"/", metadata)
	mux.Handle("GET /openapi.json", &openAPIDocs{gate: g, db: cfg.DB, timeout: cfg.RequestTimeout})
	mux.HandleFunc("GET /{$}", serveIndex)
	// REST: the gateway matches the route, the gate checks credentials and
	// limits, then the gateway reads (and inflates) the body and calls the
	// RPC. RPC: the gate checks, then a whole body sent with
	// Content-Encoding is inflated, bounded, before the Connect handler.
	gw, err := restgw.New(g.RPC(reqbody.Bound(rpc, gate.WriteError)), publicRoutes,
		publicCalls(tokens, identities, contacts, leads, events, webhooks, fields), interceptors...)
	if err != nil {
		return nil, fmt.Errorf("build the public REST gateway: %w", err)
	}
	gw.Check = g.Check
	gw.CompressMinBytes = compressMinBytes
	s.REST = gw
	mux.Handle("/", gw)
	s.Public = requestid.Middleware(obs.Middleware(reqbody.Cap(mux)))

	admins := &admin.Service{DB: cfg.DB, Sync: syncer, Now: cfg.Now, SettingsURL: strings.TrimSuffix(cfg.SettingsURL, "/"),
		WebhooksChanged: s.Webhooks.Changed}
	adminInterceptors := slices.Concat(first, []connect.Interceptor{errorInterceptor(cfg.Log, cfg.RequestTimeout), undecodableInterceptor(nil)})
	adminPath, adminHandler := adminv1connect.NewAdminServiceHandler(admins,
		connect.WithInterceptors(adminInterceptors...),
		connect.WithRecover(recoverPanic(cfg.Log)),
		connect.WithCodec(decodeLater{jsoncodec.Codec{}}),
		connect.WithCodec(decodeLater{protoCodec{}}),
		bounded,
	)
	adminRPC := http.NewServeMux()
	adminRPC.Handle(adminPath, adminHandler)
	adminRPC.HandleFunc("/", notFound)
	// The admin REST routes go through the same gateway, in the
	// google.api.http dialect their clients know (restgw.Google), behind
	// the admin handler's interceptors and, as connect.WithRecover guards
	// the handler, the panic guard.
	adminGW, err := restgw.New(reqbody.Bound(adminRPC, gate.WriteError), routes.Of(adminService),
		adminCalls(admins), append(adminInterceptors, recoverInterceptor(recoverPanic(cfg.Log)))...)
	if err != nil {
		return nil, fmt.Errorf("build the admin REST gateway: %w", err)
	}
	adminGW.Dialect = restgw.Google
	adminGW.CompressMinBytes = compressMinBytes
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
	adminMux.Handle("GET /metrics", metrics.Handler(metricsGatherers(cfg.DB, s.Webhooks.Metrics())...))
	// The admin token is checked before any body is read (and guards
	// /metrics and pprof too); then bodies are bounded and inflated like on
	// the public listener.
	adminMux.Handle("/", adminGW)
	adminObs := &observe.Observer{Log: cfg.Log, Tracer: cfg.TracerProvider, Listener: "admin"}
	// The workspace settings page has sessions of its own (a browser
	// never holds the admin token): it is served beside the token check.
	settingsPage, err := settings.New(settings.Config{DB: cfg.DB, Admin: admins, Now: cfg.Now, URL: cfg.SettingsURL,
		FrameAncestors: cfg.SettingsFrameAncestors, Log: cfg.Log, RequestTimeout: cfg.RequestTimeout,
		Webhooks: settings.AdminWebhooks{Admin: admins}})
	if err != nil {
		return nil, fmt.Errorf("build the settings page: %w", err)
	}
	adminRoot := http.NewServeMux()
	adminRoot.Handle(settings.Prefix+"/", settingsPage)
	adminRoot.Handle("/", requireAdminToken(cfg.AdminToken, cfg.Log, ratelimit.Sources{Trusted: cfg.TrustedProxies}, adminMux))
	s.Admin = requestid.Middleware(adminObs.Middleware(reqbody.Cap(admin.WithRequestBase(adminRoot))))
	return s, nil
}

// adminService is the service of the admin listener.
var adminService = adminv1.File_partner_admin_v1_admin_proto.Services().ByName("AdminService")

// notFound answers a path that is neither a route nor a procedure, as
// net/http's own 404 with the status text.
func notFound(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, http.StatusText(http.StatusNotFound), http.StatusNotFound)
}

// index is what GET / answers: where a newcomer who found the host goes
// next. The paths are relative to the host, as the API is.
var index = []byte(`{"name":"Partner Workspace API",` +
	`"docs":"https://github.com/svat/partnerapi/blob/main/docs/api.md",` +
	`"openapi":"/openapi.json",` +
	`"tokenEndpoint":"/api/oauth/token",` +
	`"oauthMetadata":"/.well-known/oauth-authorization-server",` +
	`"api":"/api/v1",` +
	`"health":"/healthz"}` + "\n")

// serveIndex answers GET / with [index]: a partner or a tool (Postman
// imports /openapi.json) finds the contract from the bare host.
func serveIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(index)
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

func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
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

// publicCalls are the implementations of the public REST routes: every
// route of the public services needs one (restgw.New fails without).
func publicCalls(tokens tokenv1connect.TokenServiceHandler, identities identityv1connect.IdentityServiceHandler,
	contacts contactv1connect.ContactServiceHandler, leads leadv1connect.LeadServiceHandler,
	events eventv1connect.EventServiceHandler, webhooks webhookv1connect.WebhookServiceHandler,
	fields customfieldv1connect.CustomFieldServiceHandler) map[string]restgw.Call {
	return map[string]restgw.Call{
		tokenv1connect.TokenServiceCreateTokenProcedure:                     restgw.Method(tokens.CreateToken),
		tokenv1connect.TokenServiceRevokeTokenProcedure:                     restgw.Method(tokens.RevokeToken),
		identityv1connect.IdentityServiceGetMeProcedure:                     restgw.Method(identities.GetMe),
		contactv1connect.ContactServiceListContactsProcedure:                restgw.Method(contacts.ListContacts),
		contactv1connect.ContactServiceCreateContactProcedure:               restgw.Method(contacts.CreateContact),
		contactv1connect.ContactServiceGetContactProcedure:                  restgw.Method(contacts.GetContact),
		contactv1connect.ContactServiceUpdateContactProcedure:               restgw.Method(contacts.UpdateContact),
		contactv1connect.ContactServiceBatchCreateContactsProcedure:         restgw.Method(contacts.BatchCreateContacts),
		contactv1connect.ContactServiceDeleteContactProcedure:               restgw.Method(contacts.DeleteContact),
		leadv1connect.LeadServiceListLeadsProcedure:                         restgw.Method(leads.ListLeads),
		leadv1connect.LeadServiceCreateLeadProcedure:                        restgw.Method(leads.CreateLead),
		leadv1connect.LeadServiceGetLeadProcedure:                           restgw.Method(leads.GetLead),
		leadv1connect.LeadServiceUpdateLeadProcedure:                        restgw.Method(leads.UpdateLead),
		leadv1connect.LeadServiceBatchCreateLeadsProcedure:                  restgw.Method(leads.BatchCreateLeads),
		leadv1connect.LeadServiceDeleteLeadProcedure:                        restgw.Method(leads.DeleteLead),
		eventv1connect.EventServiceListEventsProcedure:                      restgw.Method(events.ListEvents),
		webhookv1connect.WebhookServiceCreateWebhookEndpointProcedure:       restgw.Method(webhooks.CreateWebhookEndpoint),
		webhookv1connect.WebhookServiceListWebhookEndpointsProcedure:        restgw.Method(webhooks.ListWebhookEndpoints),
		webhookv1connect.WebhookServiceGetWebhookEndpointProcedure:          restgw.Method(webhooks.GetWebhookEndpoint),
		webhookv1connect.WebhookServiceUpdateWebhookEndpointProcedure:       restgw.Method(webhooks.UpdateWebhookEndpoint),
		webhookv1connect.WebhookServiceDeleteWebhookEndpointProcedure:       restgw.Method(webhooks.DeleteWebhookEndpoint),
		webhookv1connect.WebhookServiceRotateWebhookEndpointSecretProcedure: restgw.Method(webhooks.RotateWebhookEndpointSecret),
		webhookv1connect.WebhookServiceTestWebhookEndpointProcedure:         restgw.Method(webhooks.TestWebhookEndpoint),
		webhookv1connect.WebhookServiceReplayWebhookEndpointProcedure:       restgw.Method(webhooks.ReplayWebhookEndpoint),
		webhookv1connect.WebhookServiceListWebhookDeliveriesProcedure:       restgw.Method(webhooks.ListWebhookDeliveries),
		customfieldv1connect.CustomFieldServiceListCustomFieldsProcedure:    restgw.Method(fields.ListCustomFields),
		customfieldv1connect.CustomFieldServiceCreateCustomFieldProcedure:   restgw.Method(fields.CreateCustomField),
		customfieldv1connect.CustomFieldServiceGetCustomFieldProcedure:      restgw.Method(fields.GetCustomField),
		customfieldv1connect.CustomFieldServiceUpdateCustomFieldProcedure:   restgw.Method(fields.UpdateCustomField),
		customfieldv1connect.CustomFieldServiceDeleteCustomFieldProcedure:   restgw.Method(fields.DeleteCustomField),
	}
}

// adminCalls are the implementations of the admin REST routes.
func adminCalls(a adminv1connect.AdminServiceHandler) map[string]restgw.Call {
	return map[string]restgw.Call{
		adminv1connect.AdminServiceCreateWorkspaceProcedure:         restgw.Method(a.CreateWorkspace),
		adminv1connect.AdminServiceAddMemberProcedure:               restgw.Method(a.AddMember),
		adminv1connect.AdminServiceListWorkspacesProcedure:          restgw.Method(a.ListWorkspaces),
		adminv1connect.AdminServiceListMembersProcedure:             restgw.Method(a.ListMembers),
		adminv1connect.AdminServiceSetMemberSettingsAccessProcedure: restgw.Method(a.SetMemberSettingsAccess),
		adminv1connect.AdminServiceCreateSignInLinkProcedure:        restgw.Method(a.CreateSignInLink),
		adminv1connect.AdminServiceCreateApiClientProcedure:         restgw.Method(a.CreateApiClient),
		adminv1connect.AdminServiceListApiClientsProcedure:          restgw.Method(a.ListApiClients),
		adminv1connect.AdminServiceRotateApiClientSecretProcedure:   restgw.Method(a.RotateApiClientSecret),
		adminv1connect.AdminServiceDeactivateApiClientProcedure:     restgw.Method(a.DeactivateApiClient),
		adminv1connect.AdminServiceActivateApiClientProcedure:       restgw.Method(a.ActivateApiClient),
		adminv1connect.AdminServiceListCustomFieldsProcedure:        restgw.Method(a.ListCustomFields),
		adminv1connect.AdminServiceCreateCustomFieldProcedure:       restgw.Method(a.CreateCustomField),
		adminv1connect.AdminServiceDeleteCustomFieldProcedure:       restgw.Method(a.DeleteCustomField),
		adminv1connect.AdminServiceSetApiClientRatesProcedure:       restgw.Method(a.SetApiClientRates),
		adminv1connect.AdminServiceRevokeApiClientProcedure:         restgw.Method(a.RevokeApiClient),
		adminv1connect.AdminServiceListAuditEventsProcedure:         restgw.Method(a.ListAuditEvents),
		adminv1connect.AdminServiceListWebhookEndpointsProcedure:    restgw.Method(a.ListWebhookEndpoints),
		adminv1connect.AdminServiceDisableWebhookEndpointProcedure:  restgw.Method(a.DisableWebhookEndpoint),
		adminv1connect.AdminServiceEnableWebhookEndpointProcedure:   restgw.Method(a.EnableWebhookEndpoint),
	}
}
