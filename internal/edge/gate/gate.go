// Package gate runs the cheap checks of every public API request before
// its body is read or inflated, for REST (as the gateway's Check hook) and
// for Connect, gRPC and gRPC-Web (as middleware in front of the handlers):
//
//   - /api/v1 and the data RPCs: one Authorization header, a valid bearer
//     token, its scope, then one request from the client's read or write
//     bucket; the RateLimit headers go on every answer from here on;
//   - the token and revocation endpoints: one Authorization header, one
//     Content-Type, and the failed-authentication buckets of the source
//     address and of a client id sent with HTTP Basic at that address (a
//     client id in the body is checked by the token service once the body
//     is parsed).
//
// A request refused here costs no body read, no decompression and no
// database work beyond the cached token lookup. The principal goes into
// the context, where the auth interceptor finds it.
package gate

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/gen/partner/token/v1/tokenv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/contract/routes"
	"github.com/svat/partnerapi/internal/edge/reqbody"
	"github.com/svat/partnerapi/internal/edge/restgw"
	"github.com/svat/partnerapi/internal/observe/requestid"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/ratelimit"
)

// Gate holds what the checks need.
type Gate struct {
	Authn *auth.Authenticator
	// Limits may be nil: no rate limits.
	Limits *ratelimit.Limiter
	// Reqs are the protected procedures ([auth.Requirements]).
	Reqs map[string]auth.Requirement
	// Sources finds the source address of a client-authenticated request.
	Sources ratelimit.Sources
	// Classify turns an error that is not a domain error (the token
	// store failed) into one, exactly as the handlers' error interceptor
	// does, and logs it.
	Classify func(ctx context.Context, err error) *apierror.Error
}

// rpcErrors writes errors in the protocol of an RPC request.
var rpcErrors = connect.NewErrorWriter()

// clientAuthenticated are the procedures that authenticate an API client
// with its secret.
var clientAuthenticated = map[string]bool{
	tokenv1connect.TokenServiceCreateTokenProcedure: true,
	tokenv1connect.TokenServiceRevokeTokenProcedure: true,
}

// Check is the REST gateway's hook: it runs once a route has matched and
// before the body is read.
func (g *Gate) Check(w http.ResponseWriter, r *http.Request, procedure string) (*http.Request, *apierror.Error) {
	if procedure == "" {
		return r, g.unrouted(w, r)
	}
	if need, ok := g.Reqs[procedure]; ok {
		return g.bearer(w, r, need)
	}
	if clientAuthenticated[procedure] {
		r = r.WithContext(ratelimit.WithSource(r.Context(), g.Sources.Of(r)))
		return r, g.client(r)
	}
	return r, nil
}

// RPC runs the same checks for Connect, gRPC and gRPC-Web requests, whose
// URL path is the procedure.
func (g *Gate) RPC(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := NeedsHTTP2(r); e != nil {
			WriteError(w, r, e)
			return
		}
		if _, known := g.Reqs[r.URL.Path]; known || clientAuthenticated[r.URL.Path] {
			// The route of logs and metrics, also for requests refused here.
			requestid.InfoFrom(r.Context()).Route = r.URL.Path
		}
		r, e := g.Check(w, r, r.URL.Path)
		if e != nil {
			WriteError(w, r, e)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// NeedsHTTP2 refuses, as the caller's error, gRPC over HTTP/1 (the
// frameworks would answer 505, a server error).
func NeedsHTTP2(r *http.Request) *apierror.Error {
	ct := r.Header.Get("Content-Type")
	if r.ProtoMajor < 2 && strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/grpc-web") {
		return apierror.Malformed("gRPC needs HTTP/2")
	}
	return nil
}

// GRPCNeedsHTTP2 wraps a handler outside the gate (health) with
// NeedsHTTP2.
func GRPCNeedsHTTP2(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := NeedsHTTP2(r); e != nil {
			WriteError(w, r, e)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Streams serves bidirectional streams (reflection), which need HTTP/2
// whatever the protocol, refusing other requests as the caller's error.
func Streams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor < 2 {
			WriteError(w, r, apierror.Malformed("this RPC is a bidirectional stream and needs HTTP/2"))
			return
		}
		if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/grpc") && r.Body != nil {
			r.Body = reqbody.Frames(r)
		}
		next.ServeHTTP(w, r)
	})
}

// WriteError answers a refusal in the request's surface: an RPC error in
// the request's protocol, RFC 6749 JSON on /api/oauth, problem+json
// elsewhere.
func WriteError(w http.ResponseWriter, r *http.Request, e *apierror.Error) {
	if isProcedure(r.URL.Path) && rpcErrors.IsSupported(r) {
		// gRPC and gRPC-Web carry the error in trailers, which have no
		// room for these; set them as headers.
		if e.RetryAfter != "" {
			w.Header().Set(ratelimit.RetryAfterHeader, e.RetryAfter)
		}
		if e.Code == apierror.CodePayloadTooLarge {
			// The Connect protocol maps ResourceExhausted to 429, which
			// says "slow down"; a body too large is a 413. Clients read
			// the code from the body either way.
			w = statusWriter{ResponseWriter: w, from: http.StatusTooManyRequests, to: http.StatusRequestEntityTooLarge}
		}
		// The Connect protocol's unary error is JSON that connect-go
		// writes with encoding/json's HTML escaping ("Bearer \u003ctoken\u003e");
		// a caller reads it raw, as the REST problem is written.
		w = unescapedJSON{w}
		ce := apierror.ToConnect(e)
		if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/grpc-web") {
			// HTTP/2 forbids WWW-Authenticate as a trailer, where gRPC puts
			// error metadata; net/http would drop it with a warning.
			// ErrorInfo carries the same reason.
			ce.Meta().Del("Www-Authenticate")
		}
		requestid.InfoFrom(r.Context()).RPCCode = ce.Code().String()
		_ = rpcErrors.Write(w, r, ce)
		return
	}
	restgw.WriteError(w, r.Context(), routes.IsOAuthPath(r.URL.Path), 0, e)
}

// Bearer runs the bearer checks of a route outside the RPC table (the
// workspace's OpenAPI document) as they run for every API route: one
// Authorization header, a valid token with need's scope, one request from
// the client's bucket, the principal and tenant in the context.
func (g *Gate) Bearer(w http.ResponseWriter, r *http.Request, need auth.Requirement) (*http.Request, *apierror.Error) {
	return g.bearer(w, r, need)
}

func (g *Gate) bearer(w http.ResponseWriter, r *http.Request, need auth.Requirement) (*http.Request, *apierror.Error) {
	ctx := r.Context()
	if len(r.Header.Values("Authorization")) > 1 {
		// Ambiguous: a proxy in between may have picked the other one.
		requestid.InfoFrom(ctx).AuthFailure = "duplicate_authorization"
		return r, &apierror.Error{
			Code:      apierror.CodeMalformedRequest,
			Message:   "send exactly one Authorization header",
			Challenge: apierror.BearerChallenge(apierror.CodeInvalidRequest, "", ""),
		}
	}
	p, err := g.Authn.Authorize(ctx, r.Header.Get("Authorization"), need)
	var forbidden *apierror.Error
	if err != nil {
		e, ok := err.(*apierror.Error)
		if !ok {
			return r, g.Classify(ctx, err)
		}
		if e.Code != apierror.CodeInsufficientScope {
			return r, e
		}
		// The client is identified: its 403 spends from its bucket and
		// carries the headers like every other answer, or a client could
		// send requests it may not make without limit.
		forbidden = e
	}
	if g.Limits != nil {
		bucket, own := ratelimit.Read, p.ReadRate
		if need.Write {
			bucket, own = ratelimit.Write, p.WriteRate
		}
		d := g.Limits.Take(p.ClientID, bucket, own)
		d.SetHeaders(w.Header())
		if !d.Allowed {
			return r, d.Err()
		}
	}
	if forbidden != nil {
		return r, forbidden
	}
	// The database work of the request counts against its workspace's and
	// client's share of the pool (db.WithTenant).
	ctx = db.WithTenant(auth.WithPrincipal(ctx, &p), p.WorkspaceID, p.ClientID)
	return r.WithContext(ctx), nil
}

// unrouted spends one request of a valid token's client on a request
// that matches no route (a GET from its read bucket, anything else from
// its write bucket), so the 404 or 405 carries the RateLimit headers like
// every answer to an identified client. Without a valid token it does
// nothing: the route's absence is the answer.
func (g *Gate) unrouted(w http.ResponseWriter, r *http.Request) *apierror.Error {
	token, ok := auth.BearerToken(r.Header.Get("Authorization"))
	if !ok || g.Limits == nil || len(r.Header.Values("Authorization")) > 1 {
		return nil
	}
	p, err := g.Authn.Verify(r.Context(), token)
	if err != nil {
		return nil
	}
	bucket, own := ratelimit.Write, p.WriteRate
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		bucket, own = ratelimit.Read, p.ReadRate
	}
	d := g.Limits.Take(p.ClientID, bucket, own)
	d.SetHeaders(w.Header())
	if !d.Allowed {
		return d.Err()
	}
	return nil
}

func (g *Gate) client(r *http.Request) *apierror.Error {
	if len(r.Header.Values("Authorization")) > 1 {
		return apierror.New(apierror.CodeInvalidRequest, "send exactly one Authorization header")
	}
	if len(r.Header.Values("Content-Type")) > 1 {
		return apierror.New(apierror.CodeInvalidRequest, "send exactly one Content-Type header")
	}
	if g.Limits == nil {
		return nil
	}
	var clientID string
	if id, _, ok := auth.ParseBasic(r.Header.Get("Authorization")); ok {
		clientID = ratelimit.ClientKey(id)
	}
	// The buckets of the client id at this source and of this source:
	// failures from other addresses never refuse this request.
	if d := g.Limits.AuthAllowed(clientID, ratelimit.SourceFrom(r.Context())); !d.Allowed {
		requestid.InfoFrom(r.Context()).AuthFailure = "rate_limited"
		return d.Err()
	}
	return nil
}

// isProcedure reports whether path has the shape of an RPC path,
// "/pkg.Service/Method"; REST paths ("/api/v1/…", "/admin/v1/…") do not.
func isProcedure(path string) bool {
	svc, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return ok && strings.Contains(svc, ".") && method != "" && !strings.Contains(method, "/")
}

// statusWriter replaces one status code by another.
type statusWriter struct {
	http.ResponseWriter
	from, to int
}

func (s statusWriter) WriteHeader(code int) {
	if code == s.from {
		code = s.to
	}
	s.ResponseWriter.WriteHeader(code)
}

// unescapedJSON undoes encoding/json's HTML escaping in a JSON body
// written whole (a Connect unary error; the header says application/json),
// so that "<", ">" and "&" read as themselves. Other bodies (gRPC-Web
// trailers, Connect streaming envelopes, whose length prefix counts the
// bytes) pass unchanged.
type unescapedJSON struct{ http.ResponseWriter }

func (u unescapedJSON) Write(b []byte) (int, error) {
	if u.Header().Get("Content-Type") != "application/json" {
		return u.ResponseWriter.Write(b)
	}
	if _, err := u.ResponseWriter.Write(unescapeHTML(b)); err != nil {
		return 0, fmt.Errorf("write error body: %w", err)
	}
	return len(b), nil
}

// htmlEscapes are the escapes encoding/json writes for "<", ">" and "&".
var htmlEscapes = map[string]byte{`\u003c`: '<', `\u003e`: '>', `\u0026`: '&'}

// unescapeHTML returns the JSON text b with encoding/json's HTML escapes
// replaced by the characters they stand for, which JSON strings may hold
// as they are. Every other escape, "\\" included, is copied whole, so an
// escaped backslash followed by "u003c" stays what it was.
func unescapeHTML(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if i+6 <= len(b) {
			if c, ok := htmlEscapes[string(b[i:i+6])]; ok {
				out = append(out, c)
				i += 5
				continue
			}
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}
