// Package requestid gives every request an id, echoed in the Request-Id
// response header, in problem bodies and in logs, so a partner's support
// ticket can name the exact request.
package requestid

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"net/http"
	"sync/atomic"
)

// Header carries the id both ways. A caller's own id is kept when it is
// short and plain; otherwise a new one is made.
const Header = "Request-Id"

type ctxKey struct{}

var enc = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// prefix makes ids unique across processes; the counter within one.
var (
	prefix  = newPrefix()
	counter atomic.Uint64
)

func newPrefix() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "req_" + enc.EncodeToString(b[:])
}

// New returns a fresh id: "req_", 16 characters of process-random prefix
// and a counter. Ids are unique, not secret.
func New() string {
	n := counter.Add(1)
	var b [13]byte
	i := len(b)
	for {
		i--
		b[i] = "0123456789abcdefghjkmnpqrstvwxyz"[n&31]
		n >>= 5
		if n == 0 {
			break
		}
	}
	return prefix + string(b[i:])
}

// Info is what the layers of the server learn about a request while they
// serve it. The middleware puts one in the context before anything else
// runs; inner layers fill it in (the REST gateway or an interceptor the
// route, the authentication layer the principal or why it was refused),
// and the access log and the metrics read it once the response is
// written. Nothing secret goes in here.
type Info struct {
	// ID is the request id, also in the Request-Id header.
	ID string
	// Route is the route template ("/api/v1/contacts/{id}") or the RPC
	// procedure ("/partner.lead.v1.LeadService/CreateLead"), never a raw
	// path.
	Route string
	// ClientID and WorkspaceID are the opaque ids of the authenticated
	// API client and its workspace, when known.
	ClientID, WorkspaceID string
	// AuthFailure is why authentication was refused, e.g. "invalid_token",
	// "wrong_secret".
	AuthFailure string
}

// Unmatched is the Route of a request that no route matched, such as a
// 404 under a catch-all.
const Unmatched = "unmatched"

// InfoFrom returns the request's Info. Outside a request it returns a
// throwaway Info, so callers never check for nil.
func InfoFrom(ctx context.Context) *Info {
	if info, ok := ctx.Value(ctxKey{}).(*Info); ok {
		return info
	}
	return &Info{}
}

// FromContext returns the request's id, or "".
func FromContext(ctx context.Context) string {
	if info, ok := ctx.Value(ctxKey{}).(*Info); ok {
		return info.ID
	}
	return ""
}

// WithID stores a new Info with id in ctx.
func WithID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, &Info{ID: id})
}

// Middleware assigns the id and sets the response header before anything
// else runs, so even a panic's 500 carries it.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(Header)
		if !acceptable(id) {
			id = New()
		}
		w.Header().Set(Header, id)
		next.ServeHTTP(w, r.WithContext(WithID(r.Context(), id)))
	})
}

func acceptable(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
