// Package settings serves the workspace settings page: members with
// settings access manage their workspace's API clients in a browser
// (product.md, "Workspace settings page"). It is served by the admin
// listener under /settings/, server-rendered with html/template, with no
// script but the "Copy" button's.
//
// Every action is a call of the admin service (service/admin), the same
// code the admin RPCs run, with the signed-in member as the acting
// member: it is checked and audited exactly as over the admin API.
//
// A member signs in with a one-time link (admin RPC CreateSignInLink) and
// stays signed in with a session cookie; the session is checked at every
// request, together with the member's approval and settings access.
// State-changing forms are POSTs guarded twice against cross-site request
// forgery: net/http's CrossOriginProtection judges Sec-Fetch-Site and
// Origin, and every form carries a token derived from the session.
package settings

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/internal/observe/requestid"
	"github.com/svat/partnerapi/service/admin"
)

// Prefix is where the admin listener serves the page.
const Prefix = "/settings"

// Session lifetimes (product.md): a session ends 8 hours after sign-in,
// or after 30 minutes without a request.
const (
	SessionTTL  = 8 * time.Hour
	IdleTimeout = 30 * time.Minute
)

// maxFormBytes bounds a form body: the largest form is a custom field's,
// with up to 200 options of a value and a label each.
const maxFormBytes = 64 << 10

// Config is what the page needs.
type Config struct {
	DB *db.DB
	// Admin runs every action of the page.
	Admin *admin.Service
	// Now is the clock of sessions; nil means time.Now.
	Now func() time.Time
	// URL is the page's public base (PARTNER_SETTINGS_URL), such as
	// https://crm.example.com/partner-settings; empty means this
	// listener's own /settings. Its path prefixes every link and
	// redirect, its origin is trusted for forms, and an https URL makes
	// the session cookie Secure even behind a proxy that ends TLS.
	URL string
	// FrameAncestors is the CSP frame-ancestors source list
	// (PARTNER_SETTINGS_FRAME_ANCESTORS); empty means 'none'.
	FrameAncestors string
	// Webhooks, when set, lists each client's webhook endpoints with
	// their health, disables (after a confirmation) and enables them;
	// without it the page shows no such section.
	Webhooks Webhooks
	// Log receives failures, never a form value, a secret or a code.
	Log *slog.Logger
	// RequestTimeout bounds the database work of one request.
	RequestTimeout time.Duration
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Handler is the settings page.
type Handler struct {
	cfg    Config
	base   string // the public path of the page, without a trailing slash
	https  bool   // the public URL is https
	csp    string
	pages  map[string]*template.Template
	origin *http.CrossOriginProtection
	mux    *http.ServeMux
}

// New builds the page.
func New(cfg Config) (*Handler, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 4 * time.Second
	}
	h := &Handler{cfg: cfg, base: Prefix, pages: map[string]*template.Template{}, origin: http.NewCrossOriginProtection()}
	if cfg.URL != "" {
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("PARTNER_SETTINGS_URL %q: want an absolute http(s) URL without query or fragment", cfg.URL)
		}
		h.base = strings.TrimSuffix(u.Path, "/")
		h.https = u.Scheme == "https"
		// Behind the CRM's reverse proxy the Host the page sees may not
		// be the browser's; the public origin is the page's own.
		if err := h.origin.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			return nil, fmt.Errorf("trust the settings origin: %w", err)
		}
	}
	ancestors := strings.TrimSpace(cfg.FrameAncestors)
	if ancestors == "" {
		ancestors = "'none'"
	}
	if strings.ContainsAny(ancestors, ";,\r\n") {
		return nil, fmt.Errorf("PARTNER_SETTINGS_FRAME_ANCESTORS %q: want a space-separated CSP source list", cfg.FrameAncestors)
	}
	h.csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'none'; " +
		"form-action 'self'; base-uri 'none'; frame-ancestors " + ancestors
	for _, page := range []string{"clients", "client", "create", "secret", "confirm", "audit", "message", "switch", "fields", "field", "fieldconfirm"} {
		t, err := template.New(page).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("parse template %s: %w", page, err)
		}
		h.pages[page] = t
	}
	h.origin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.message(w, r, nil, http.StatusForbidden, "Request refused",
			"This form was sent from another site, so it was not carried out.")
	}))
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("open static files: %w", err)
	}
	m := http.NewServeMux()
	files := http.StripPrefix(Prefix+"/static/", http.FileServerFS(static))
	m.HandleFunc("GET "+Prefix+"/static/", func(w http.ResponseWriter, r *http.Request) {
		route(r, "GET "+Prefix+"/static/")
		files.ServeHTTP(w, r)
	})
	m.HandleFunc("GET "+Prefix+"/sign-in", h.signIn)
	m.HandleFunc("POST "+Prefix+"/sign-in", h.continueSignIn)
	h.member(m, "POST "+Prefix+"/sign-out", h.signOut)
	h.member(m, "GET "+Prefix+"/{$}", h.clients)
	h.member(m, "GET "+Prefix+"/clients/new", h.createForm)
	h.member(m, "POST "+Prefix+"/clients", h.create)
	h.member(m, "GET "+Prefix+"/clients/{id}", h.client)
	h.member(m, "GET "+Prefix+"/clients/{id}/rotate", h.confirmRotate)
	h.member(m, "POST "+Prefix+"/clients/{id}/rotate", h.rotate)
	h.member(m, "POST "+Prefix+"/clients/{id}/deactivate", h.deactivate)
	h.member(m, "POST "+Prefix+"/clients/{id}/activate", h.activate)
	h.member(m, "GET "+Prefix+"/clients/{id}/revoke", h.confirmRevoke)
	h.member(m, "POST "+Prefix+"/clients/{id}/revoke", h.revoke)
	h.member(m, "GET "+Prefix+"/clients/{id}/webhooks/{endpoint}/disable", h.confirmDisableEndpoint)
	h.member(m, "POST "+Prefix+"/clients/{id}/webhooks/{endpoint}/disable", h.disableEndpoint)
	h.member(m, "POST "+Prefix+"/clients/{id}/webhooks/{endpoint}/enable", h.enableEndpoint)
	h.member(m, "GET "+Prefix+"/audit", h.audit)
	h.member(m, "GET "+Prefix+"/fields", h.fields)
	h.member(m, "GET "+Prefix+"/fields/new", h.addFieldForm)
	h.member(m, "POST "+Prefix+"/fields", h.addField)
	h.member(m, "GET "+Prefix+"/fields/{field}/edit", h.editFieldForm)
	h.member(m, "POST "+Prefix+"/fields/{field}", h.editField)
	h.member(m, "GET "+Prefix+"/fields/{field}/delete", h.confirmDeleteField)
	h.member(m, "POST "+Prefix+"/fields/{field}/delete", h.deleteField)
	m.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		route(r, requestid.Unmatched)
		h.message(w, r, nil, http.StatusNotFound, "Page not found", "There is no such page in the workspace settings.")
	})
	h.mux = m
	return h, nil
}

// ServeHTTP sets the page's headers on every answer, refuses cross-origin
// form posts, and routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", h.csp)
	hd.Set("Referrer-Policy", "no-referrer")
	// Every page may show a secret or what a session may see: nothing is
	// kept by the browser or any cache between.
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	if h.csp != "" && strings.HasSuffix(h.csp, "frame-ancestors 'none'") {
		hd.Set("X-Frame-Options", "DENY")
	}
	h.origin.Handler(h.mux).ServeHTTP(w, r)
}

// route names the request's route for the access log and metrics (the
// pattern, never the raw path, which for sign-in holds the code).
func route(r *http.Request, pattern string) {
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = pattern[i+1:]
	}
	requestid.InfoFrom(r.Context()).Route = pattern
}

// member registers a page that needs a signed-in member; a POST also
// needs the form's CSRF token.
func (h *Handler) member(m *http.ServeMux, pattern string, fn func(http.ResponseWriter, *http.Request, *session)) {
	post := strings.HasPrefix(pattern, "POST ")
	m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		route(r, pattern)
		ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
		s, ok := h.session(w, r)
		if !ok {
			return
		}
		info := requestid.InfoFrom(ctx)
		info.WorkspaceID = s.workspace
		if post {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				h.message(w, r, s, http.StatusBadRequest, "Form not read", "The form could not be read. Go back and try again.")
				return
			}
			if !s.csrfOK(r.PostForm.Get("csrf")) {
				h.message(w, r, s, http.StatusForbidden, "Form refused",
					"This form could not be verified, so it was not carried out. Reload the page and try again.")
				return
			}
		}
		if strings.Contains(pattern, "{id}") && !h.scoped(w, r, s) {
			return
		}
		fn(w, r, s)
	})
}

// page is what every template gets; the page's own data is embedded.
type page struct {
	Title, Nav string
	Base       string
	Email      string
	CSRF       string
	Script     bool
	Refresh    string
	Notice     string
	Heading    string
	Explain    string
	Link       string
	LinkText   string

	Clients []clientRow
	Client  *clientRow
	// Webhooks shows the client's "Webhook endpoints" section (and, on
	// a confirmation, the "Disable its webhook endpoints" checkbox with
	// DisableHint beside it; DisableLocked: checked for good).
	Webhooks      bool
	DisableHint   string
	DisableLocked bool
	Endpoints     []WebhookEndpoint
	WebhooksError string
	Form          *createForm
	MaxRate       int
	Secret        string
	// Action, Button and ButtonClass are a confirmation's form; FormID,
	// when set, makes it act once (see resubmit.go).
	Action, Button, ButtonClass string
	FormID                      string
	Events                      []eventRow
	// FieldTables and FieldForm are the "Custom fields" page's.
	FieldTables []fieldTable
	FieldForm   *fieldForm
	// Audit is the audit log's filter; Next and Newest the addresses of
	// its older and newest pages, with the same filters.
	Audit        *auditFilter
	Next, Newest string
}

// render writes a page. A failure to render after the header was sent
// can only be logged.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := h.pages[name].ExecuteTemplate(w, "layout", data); err != nil {
		h.cfg.Log.ErrorContext(r.Context(), "render settings page", "page", name, "err", err)
	}
}

// frame fills the parts of a page every template uses.
func (h *Handler) frame(s *session, title, nav string) page {
	p := page{Title: title, Nav: nav, Base: h.base}
	if s != nil {
		p.Email, p.CSRF = s.email, s.csrf
	}
	return p
}

// message answers with a page that only says something.
func (h *Handler) message(w http.ResponseWriter, r *http.Request, s *session, status int, heading, explain string) {
	p := h.frame(s, heading, "")
	p.Heading, p.Explain = heading, explain
	if s != nil {
		p.Link, p.LinkText = h.base+"/", "Back to API clients"
	}
	h.render(w, r, status, "message", p)
}

// fail answers an unexpected failure, logged without the request's form.
// The database's "not now" (a failover, a frozen primary, a full pool) is
// a 503, as the API answers it.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, s *session, what string, err error) {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, db.ErrUnavailable) || connect.CodeOf(err) == connect.CodeUnavailable {
		h.message(w, r, s, http.StatusServiceUnavailable, "Try again", "The service is busy. Try again in a moment.")
		return
	}
	h.cfg.Log.ErrorContext(r.Context(), "settings page failed", "action", what, "err", err,
		"request_id", requestid.InfoFrom(r.Context()).ID)
	h.message(w, r, s, http.StatusInternalServerError, "Something went wrong",
		"The action could not be completed. Try again; if it keeps failing, tell your operator the time it happened.")
}
