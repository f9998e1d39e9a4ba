// Package auth checks bearer access tokens on /api/v1 (RFC 6750).
//
// The check has two layers. [Authenticator.Verify] does what needs no
// storage: the token's shape and checksum, its expiry against an injectable
// clock, and the scope. It asks a [Store] for the token's record by hash;
// [DBStore] reads PostgreSQL and [Cache] wraps any Store with an in-process,
// invalidated cache. The required scope of each RPC comes from the
// partner.auth.v1.access method option (see [Requirements]).
package auth

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svat/partnerapi/db"
	authv1 "github.com/svat/partnerapi/gen/partner/auth/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/contract/routes"
	"github.com/svat/partnerapi/internal/observe/metrics"
	"github.com/svat/partnerapi/internal/observe/requestid"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/scope"
	"github.com/svat/partnerapi/internal/security/secret"
)

// ErrInvalidToken means the token is unknown, revoked, expired, or belongs
// to a client that is not active.
var ErrInvalidToken = errors.New("auth: invalid token")

// Principal is who a valid token speaks for.
type Principal struct {
	WorkspaceID   uuid.UUID
	WorkspaceName string
	ClientID      uuid.UUID
	ClientName    string
	Scopes        scope.Set
	ExpiresAt     time.Time
	// ReadRate and WriteRate are the client's own rate limits in requests
	// per second; 0 means the server default.
	ReadRate, WriteRate int32
	// TokenHash is the SHA-256 of the token the request presented (set by
	// [Authenticator.Verify]), which names the token without being it:
	// the audit log records its [Principal.TokenHashPrefix].
	TokenHash secret.Hash
}

// TokenHashPrefix is the first 16 hex digits of the token's SHA-256: what
// the audit log records of the token an API client acted with. It
// identifies the token (access_tokens.token_hash starts with it) and
// tells nothing of the token itself. "" when no token is known.
func (p *Principal) TokenHashPrefix() string {
	if p.TokenHash == (secret.Hash{}) {
		return ""
	}
	return hex.EncodeToString(p.TokenHash[:8])
}

// Record is what is stored about a token: its principal, and the state
// that decides whether it may be used.
type Record struct {
	Principal
	Revoked      bool
	ClientActive bool
	// SecretRotated means the client's secret generation has moved on
	// since the token was issued, however late its INSERT committed: the
	// secret was rotated, or the client was deactivated with
	// revoke_tokens, which ends its tokens and keeps its secret.
	SecretRotated bool
}

// Client is what the token endpoint needs to authenticate an API client.
type Client struct {
	WorkspaceID uuid.UUID
	ID          uuid.UUID
	SecretHash  []byte
	// SecretGeneration counts the rotations of the secret (and the
	// deactivations that ended every token); a token stores the
	// generation its secret was verified against (migration 00020).
	SecretGeneration int64
	Scopes           scope.Set
	Active           bool
	// Status is active, inactive or revoked.
	Status string
	// ReadRate and WriteRate are the client's own rate limits; 0 means the
	// server default.
	ReadRate, WriteRate int32
}

// ClientStore loads an API client by id, or returns ErrUnknownClient. A
// cache wraps it like it wraps the token lookup.
type ClientStore interface {
	LookupClient(ctx context.Context, id uuid.UUID) (Client, error)
}

// ErrUnknownClient means no API client has the id.
var ErrUnknownClient = errors.New("auth: unknown client")

// Store loads the record of a token by the SHA-256 of the token, or
// returns ErrInvalidToken when no token has that hash. It is the one token
// lookup, the function a cache wraps ([Cache]); the rules that decide
// validity live in [Authenticator.Verify], above any cache.
type Store interface {
	LookupToken(ctx context.Context, hash secret.Hash) (Record, error)
}

// Syncer is told after a change that invalidates tokens has committed, and
// returns when this replica's cache has caught up ([Cache.Sync]).
type Syncer interface {
	Sync(ctx context.Context)
}

// UsageRecorder is told about every accepted token, to maintain the
// client's last-used time in batches.
type UsageRecorder interface {
	Touch(workspaceID, clientID uuid.UUID)
}

// Authenticator verifies bearer tokens.
type Authenticator struct {
	Store Store
	// Now is the clock; tests inject one to expire tokens without waiting.
	Now   func() time.Time
	Usage UsageRecorder
}

// Verify checks a presented token and returns its principal.
func (a *Authenticator) Verify(ctx context.Context, token string) (Principal, error) {
	if !secret.WellFormedToken(token) {
		return Principal{}, ErrInvalidToken
	}
	hash := secret.HashOf(token)
	rec, err := a.Store.LookupToken(ctx, hash)
	if err != nil {
		return Principal{}, err
	}
	p := rec.Principal
	p.TokenHash = hash
	if rec.Revoked || rec.SecretRotated || !rec.ClientActive || !a.now().Before(p.ExpiresAt) {
		return Principal{}, ErrInvalidToken
	}
	if a.Usage != nil {
		a.Usage.Touch(p.WorkspaceID, p.ClientID)
	}
	return p, nil
}

func (a *Authenticator) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// DBStore reads token records from PostgreSQL.
type DBStore struct {
	DB *db.DB
	// Log hears of stored scopes this binary does not know (optional).
	Log *slog.Logger
}

// scopes reads a stored scope list: unknown scopes are left out of the
// set and logged, never silently dropped with the known ones.
func (s DBStore) scopes(ctx context.Context, what string, id uuid.UUID, names []string) scope.Set {
	set, unknown := scope.FromStored(names)
	if len(unknown) > 0 && s.Log != nil {
		s.Log.WarnContext(ctx, "stored scopes unknown to this version are not granted", "record", what,
			"client_id", opaqueid.Format(opaqueid.Client, id), "unknown", unknown)
	}
	return set
}

// LookupToken implements [Store].
func (s DBStore) LookupToken(ctx context.Context, hash secret.Hash) (Record, error) {
	row, err := db.Q.AccessTokenVerify(ctx, s.DB.Conn(), hash[:])
	if errors.Is(err, db.ErrNotFound) {
		return Record{}, ErrInvalidToken
	}
	if err != nil {
		return Record{}, fmt.Errorf("look up token: %w", err)
	}
	scopes := s.scopes(ctx, "access_token", row.ClientID, row.Scopes)
	return Record{
		Principal: Principal{
			WorkspaceID: row.WorkspaceID, WorkspaceName: row.WorkspaceName,
			ClientID: row.ClientID, ClientName: row.ClientName,
			Scopes: scopes, ExpiresAt: row.ExpiresAt,
			ReadRate: deref(row.ReadRate), WriteRate: deref(row.WriteRate),
		},
		Revoked:       row.RevokedAt != nil,
		ClientActive:  row.ClientStatus == "active",
		SecretRotated: !row.SecretCurrent,
	}, nil
}

// LookupClient implements [ClientStore].
func (s DBStore) LookupClient(ctx context.Context, id uuid.UUID) (Client, error) {
	row, err := db.Q.APIClientAuthenticate(ctx, s.DB.Conn(), id)
	if errors.Is(err, db.ErrNotFound) {
		return Client{}, ErrUnknownClient
	}
	if err != nil {
		return Client{}, fmt.Errorf("look up client: %w", err)
	}
	scopes := s.scopes(ctx, "api_client", row.ID, row.Scopes)
	return Client{
		WorkspaceID: row.WorkspaceID, ID: row.ID, SecretHash: row.SecretHash, SecretGeneration: row.SecretGeneration,
		Scopes: scopes, Active: row.Status == "active", Status: row.Status, ReadRate: deref(row.ReadRate), WriteRate: deref(row.WriteRate),
	}, nil
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

type principalKey struct{}

// WithPrincipal stores p in ctx.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal the bearer interceptor stored. Handlers
// of protected RPCs can rely on it being there.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Requirement is what an RPC needs from a token.
type Requirement struct {
	// Scope is the needed scope; zero means any valid token.
	Scope scope.Set
	// AnyOf are scopes of which the token must carry at least one (the
	// access option's any_of); zero means none is asked.
	AnyOf scope.Set
	// Name is the scope's name, for the challenge (the any_of scopes,
	// space-separated, when the option lists those).
	Name string
	// Write says the RPC spends from the client's write bucket rather than
	// its read bucket: every RPC whose REST route is not a GET (creates,
	// updates, batches).
	Write bool
}

// Allows reports whether a token of scopes meets the requirement: it
// carries Scope, and one of AnyOf when that is set.
func (r Requirement) Allows(scopes scope.Set) bool {
	return scopes.Has(r.Scope) && (r.AnyOf == 0 || scopes&r.AnyOf != 0)
}

// Requirements reads the partner.auth.v1.access option of every method of
// the given services, keyed by Connect procedure ("/pkg.Service/Method").
// Methods without the option are not protected.
func Requirements(services ...protoreflect.ServiceDescriptor) (map[string]Requirement, error) {
	out := map[string]Requirement{}
	table := routes.Of(services...)
	for _, svc := range services {
		methods := svc.Methods()
		for i := range methods.Len() {
			m := methods.Get(i)
			opts := m.Options()
			if opts == nil || !proto.HasExtension(opts, authv1.E_Access) {
				continue
			}
			access := proto.GetExtension(opts, authv1.E_Access).(*authv1.Access)
			var req Requirement
			if name := access.GetScope(); name != "" {
				s, ok := scope.Lookup(name)
				if !ok {
					return nil, fmt.Errorf("read access option of %s: unknown scope %q", m.FullName(), name)
				}
				req = Requirement{Scope: s, Name: name}
			}
			if names := access.GetAnyOf(); len(names) > 0 {
				s, unknown := scope.FromNames(names)
				if unknown != "" {
					return nil, fmt.Errorf("read access option of %s: unknown scope %q", m.FullName(), unknown)
				}
				req.AnyOf = s
				req.Name = strings.TrimSpace(req.Name + " " + strings.Join(names, " "))
			}
			procedure := "/" + string(svc.FullName()) + "/" + string(m.Name())
			rt, ok := table.Find(procedure)
			req.Write = !ok || rt.Method != http.MethodGet
			out[procedure] = req
		}
	}
	return out, nil
}

// Interceptor enforces bearer authentication and scopes on the procedures
// in reqs, and stores the principal in the context.
func (a *Authenticator) Interceptor(reqs map[string]Requirement) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			need, protected := reqs[req.Spec().Procedure]
			if !protected {
				return next(ctx, req)
			}
			// The HTTP gate (internal/edge/gate) has normally checked the token
			// and spent the rate limit before the body was read; the scope
			// is checked again here against the RPC actually called.
			if p := FromContext(ctx); p != nil {
				if !need.Allows(p.Scopes) {
					return nil, insufficientScope(ctx, need)
				}
				return next(ctx, req)
			}
			p, err := a.Authorize(ctx, req.Header().Get("Authorization"), need)
			if err != nil {
				return nil, err
			}
			return next(WithPrincipal(ctx, &p), req)
		}
	})
}

// Authorize checks an "Authorization: Bearer" header against what an RPC
// needs, and returns the token's principal. A refused token is counted in
// partner_auth_failures_total and noted in the request's log record. A
// valid token without the needed scope returns its principal with the
// insufficient_scope error: the client is identified, and the gate
// charges its rate limit for the 403 like for any other answer.
func (a *Authenticator) Authorize(ctx context.Context, header string, need Requirement) (Principal, error) {
	token, ok := BearerToken(header)
	if !ok {
		requestid.InfoFrom(ctx).AuthFailure = "missing_token"
		return Principal{}, &apierror.Error{
			Code:      apierror.CodeUnauthenticated,
			Message:   "send an access token in the Authorization header: Bearer <token>",
			Challenge: apierror.BearerChallenge("", "", ""),
		}
	}
	p, err := a.Verify(ctx, token)
	if errors.Is(err, ErrInvalidToken) {
		requestid.InfoFrom(ctx).AuthFailure = "invalid_token"
		metrics.AuthFailures.WithLabelValues("invalid_token").Inc()
		return Principal{}, &apierror.Error{
			Code:      apierror.CodeInvalidToken,
			Message:   "the access token is invalid, expired or revoked",
			Challenge: apierror.BearerChallenge(apierror.CodeInvalidToken, "", ""),
		}
	}
	if err != nil {
		return Principal{}, err
	}
	info := requestid.InfoFrom(ctx)
	info.ClientID = opaqueid.Format(opaqueid.Client, p.ClientID)
	info.WorkspaceID = opaqueid.Format(opaqueid.Workspace, p.WorkspaceID)
	if !need.Allows(p.Scopes) {
		return p, insufficientScope(ctx, need)
	}
	return p, nil
}

// InsufficientScope is the 403 of a request that its token's scopes allow
// in general but not in part (an events list asking for a type it cannot
// read), with the same challenge as a refused RPC.
func InsufficientScope(ctx context.Context, name string) *apierror.Error {
	return insufficientScope(ctx, Requirement{Name: name})
}

func insufficientScope(ctx context.Context, need Requirement) *apierror.Error {
	requestid.InfoFrom(ctx).AuthFailure = apierror.CodeInsufficientScope
	return &apierror.Error{
		Code:      apierror.CodeInsufficientScope,
		Message:   "the access token lacks the scope " + need.Name,
		Challenge: apierror.BearerChallenge(apierror.CodeInsufficientScope, "", need.Name),
		Scope:     need.Name,
	}
}

// BearerToken extracts the token of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive (RFC 9110 §11.1).
func BearerToken(header string) (string, bool) {
	const scheme = "bearer "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", false
	}
	token := strings.TrimLeft(header[len(scheme):], " ")
	return token, token != ""
}
