// Package token implements partner.token.v1.TokenService: the OAuth 2.0
// client credentials grant (RFC 6749 §4.4) and token revocation (RFC 7009).
//
// The same handler serves REST (the REST gateway, internal/edge/restgw, calls
// it in process with the request message it built from the form or JSON
// body) and Connect/gRPC. Every failure is an [apierror.Error] whose code
// is the OAuth error code.
package token

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	tokenv1 "github.com/svat/partnerapi/gen/partner/token/v1"
	"github.com/svat/partnerapi/gen/partner/token/v1/tokenv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/observe/metrics"
	"github.com/svat/partnerapi/internal/observe/requestid"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/ratelimit"
	"github.com/svat/partnerapi/internal/security/scope"
	"github.com/svat/partnerapi/internal/security/secret"
)

// Lifetime of every access token: 365 days.
const Lifetime = 31536000 * time.Second

// Service is the token service.
type Service struct {
	DB *db.DB
	// Clients looks up API clients; the server passes the cache.
	Clients auth.ClientStore
	// Now is the clock; tests inject one.
	Now   func() time.Time
	Usage auth.UsageRecorder
	// Sync lets token caches catch up after a revocation.
	Sync auth.Syncer
	// Writer stores issued tokens, batching concurrent ones.
	Writer *Writer
	// Limits holds the failed-authentication buckets and the clients'
	// write buckets (a successful token request is a write); nil means no
	// limits.
	Limits *ratelimit.Limiter
	// Log records failed client authentications: client id, source and
	// reason, never a secret.
	Log *slog.Logger
}

var _ tokenv1connect.TokenServiceHandler = (*Service)(nil)

// dummyHash is compared against when the client is unknown, so an unknown
// client costs the same as a wrong secret.
var dummyHash = sha256.Sum256([]byte("partner-api: no such client"))

// client is an authenticated API client.
type client struct {
	workspaceID uuid.UUID
	id          uuid.UUID
	scopes      scope.Set
	writeRate   int32
	// generation is the secret generation the secret was verified
	// against; the token stores it, so a rotation committed at any time
	// after the check invalidates the token.
	generation int64
}

// CreateToken implements the client credentials grant.
func (s *Service) CreateToken(ctx context.Context, req *connect.Request[tokenv1.CreateTokenRequest]) (*connect.Response[tokenv1.CreateTokenResponse], error) {
	m := req.Msg
	creds, err := credentials(req.Header().Get("Authorization"), m.GetClientId(), m.GetClientSecret())
	if err != nil {
		countRefused(ctx, err)
		return nil, err
	}
	if err := s.authAllowed(ctx, creds.id); err != nil {
		return nil, err
	}
	switch m.GetGrantType() {
	case "client_credentials":
	case "":
		return nil, apierror.New(apierror.CodeInvalidRequest, "grant_type is required")
	default:
		return nil, apierror.New(apierror.CodeUnsupportedGrantType, "only grant_type=client_credentials is supported")
	}
	c, err := s.authenticate(ctx, creds)
	if err != nil {
		return nil, err
	}
	// From here on the client is identified: every answer carries the
	// state of its write bucket.
	granted := c.scopes
	if m.GetScope() != "" {
		asked, unknown := scope.Parse(m.GetScope())
		if asked == 0 && unknown == "" {
			// Only spaces: no scope-token at all (RFC 6749 §3.3).
			return nil, s.withLimits(c, apierror.New(apierror.CodeInvalidScope, "scope names no scope; omit it to get every scope of the client"))
		}
		if unknown != "" {
			return nil, s.withLimits(c, apierror.New(apierror.CodeInvalidScope, fmt.Sprintf("unknown scope %q", unknown)))
		}
		if !c.scopes.Has(asked) {
			return nil, s.withLimits(c, apierror.New(apierror.CodeInvalidScope, "scope "+(asked&^c.scopes).String()+" is not allowed on this client"))
		}
		granted = asked
	}
	if granted == 0 {
		return nil, s.withLimits(c, apierror.New(apierror.CodeInvalidScope, "the client has no scopes"))
	}
	var limit ratelimit.Decision
	if s.Limits != nil {
		if limit = s.Limits.Take(c.id, ratelimit.Write, c.writeRate); !limit.Allowed {
			return nil, limit.Err()
		}
	}

	tok, hash := secret.NewToken()
	now := s.now()
	err = s.Writer.Insert(ctx, dbsqlc.AccessTokenCreateParams{
		TokenHash: hash[:], WorkspaceID: c.workspaceID, ClientID: c.id,
		Scopes: granted.Names(), CreatedAt: now, ExpiresAt: now.Add(Lifetime), SecretGeneration: c.generation,
	})
	if err != nil {
		return nil, serverError(fmt.Errorf("store token: %w", err))
	}
	metrics.TokensIssued.Inc()
	if s.Usage != nil {
		s.Usage.Touch(c.workspaceID, c.id)
	}
	res := connect.NewResponse(&tokenv1.CreateTokenResponse{
		AccessToken: tok, TokenType: "Bearer", ExpiresIn: int32(Lifetime / time.Second), Scope: granted.String(),
	})
	noStore(res.Header())
	limit.SetHeaders(res.Header())
	return res, nil
}

// withLimits adds the state of an identified client's write bucket to an
// error answer, without spending from it.
func (s *Service) withLimits(c client, e *apierror.Error) *apierror.Error {
	if s.Limits == nil {
		return e
	}
	if d := s.Limits.Peek(c.id, ratelimit.Write, c.writeRate); d.Bucket != "" {
		e.Header = http.Header{}
		d.SetHeaders(e.Header)
	}
	return e
}

// authAllowed refuses, with 429, a request naming a client id whose
// failed-authentication bucket at the request's source address is empty,
// or coming from a source address whose own bucket is empty, whatever its
// secret. Failures from other addresses never refuse it.
func (s *Service) authAllowed(ctx context.Context, clientID string) error {
	if s.Limits == nil {
		return nil
	}
	if d := s.Limits.AuthAllowed(ratelimit.ClientKey(clientID), ratelimit.SourceFrom(ctx)); !d.Allowed {
		requestid.InfoFrom(ctx).AuthFailure = "rate_limited"
		return d.Err()
	}
	return nil
}

// RevokeToken implements RFC 7009. Only tokens issued to the calling client
// are revoked; anything else is silently accepted (§2.2).
func (s *Service) RevokeToken(ctx context.Context, req *connect.Request[tokenv1.RevokeTokenRequest]) (*connect.Response[tokenv1.RevokeTokenResponse], error) {
	m := req.Msg
	creds, err := credentials(req.Header().Get("Authorization"), m.GetClientId(), m.GetClientSecret())
	if err != nil {
		countRefused(ctx, err)
		return nil, err
	}
	if err := s.authAllowed(ctx, creds.id); err != nil {
		return nil, err
	}
	if m.GetToken() == "" {
		return nil, apierror.New(apierror.CodeInvalidRequest, "token is required")
	}
	c, err := s.authenticate(ctx, creds)
	if err != nil {
		return nil, err
	}
	if secret.WellFormedToken(m.GetToken()) {
		hash := secret.HashOf(m.GetToken())
		n, err := db.Q.AccessTokenRevoke(ctx, s.DB.Conn(), dbsqlc.AccessTokenRevokeParams{
			TokenHash: hash[:], WorkspaceID: c.workspaceID, ClientID: c.id,
		})
		if err != nil {
			return nil, serverError(fmt.Errorf("revoke token: %w", err))
		}
		if n > 0 && s.Sync != nil {
			s.Sync.Sync(ctx)
		}
	}
	res := connect.NewResponse(&tokenv1.RevokeTokenResponse{})
	noStore(res.Header())
	return res, nil
}

type clientCredentials struct{ id, secret string }

// credentials picks the client's one authentication method: HTTP Basic or
// the body parameters. Sending a secret both ways is invalid_request
// (RFC 6749 §2.3: one method per request); a body client_id alongside Basic
// is tolerated when it names the same client.
func credentials(authorization, bodyID, bodySecret string) (clientCredentials, error) {
	if authorization == "" {
		return clientCredentials{bodyID, bodySecret}, nil
	}
	if !auth.IsBasic(authorization) {
		return clientCredentials{}, refused{"unsupported_auth_scheme",
			invalidClient("client authentication must use HTTP Basic or client_id and client_secret in the body")}
	}
	if bodySecret != "" {
		return clientCredentials{}, apierror.New(apierror.CodeInvalidRequest, "use either HTTP Basic or client_secret in the body, not both")
	}
	id, sec, ok := auth.ParseBasic(authorization)
	if !ok {
		return clientCredentials{}, refused{"malformed_credentials", invalidClient("malformed HTTP Basic credentials")}
	}
	if bodyID != "" && bodyID != id {
		return clientCredentials{}, apierror.New(apierror.CodeInvalidRequest, "client_id in the body does not match HTTP Basic")
	}
	return clientCredentials{id, sec}, nil
}

// authenticate checks the client's secret and status. An unknown client
// still costs one lookup and one hash comparison, like a known one. A
// failure is logged (client id, source, reason; never the secret),
// counted, and spent from the failed-authentication buckets.
func (s *Service) authenticate(ctx context.Context, creds clientCredentials) (client, error) {
	// Admitted, the request holds a place in the failure buckets until
	// its outcome is known, so concurrent guesses cannot all pass a check
	// made before any of them has failed.
	var attempt *ratelimit.Attempt
	if s.Limits != nil {
		var d ratelimit.Decision
		if attempt, d = s.Limits.Attempt(ctx, ratelimit.ClientKey(creds.id), ratelimit.SourceFrom(ctx)); !d.Allowed {
			requestid.InfoFrom(ctx).AuthFailure = "rate_limited"
			return client{}, d.Err()
		}
		defer attempt.Release()
	}
	if creds.id == "" || creds.secret == "" {
		s.failed(ctx, attempt, creds.id, "missing_credentials")
		return client{}, invalidClient("client credentials are missing")
	}
	stored := dummyHash[:]
	var c auth.Client
	id, wellFormed := opaqueid.Parse(opaqueid.Client, creds.id)
	found := false
	if wellFormed {
		var err error
		c, err = s.Clients.LookupClient(ctx, id)
		switch {
		case err == nil:
			stored, found = c.SecretHash, true
		case !errors.Is(err, auth.ErrUnknownClient):
			return client{}, serverError(err)
		}
	}
	equal := secret.Equal(creds.secret, stored)
	if !equal || !found || !c.Active {
		reason := "wrong_secret"
		switch {
		case !wellFormed:
			reason = "malformed_client_id"
		case !found:
			reason = "unknown_client"
		case !equal:
		case c.Status == "revoked":
			reason = "revoked_client"
		default:
			reason = "inactive_client"
		}
		s.failed(ctx, attempt, creds.id, reason)
		return client{}, invalidClient("client authentication failed")
	}
	info := requestid.InfoFrom(ctx)
	info.ClientID = opaqueid.Format(opaqueid.Client, c.ID)
	info.WorkspaceID = opaqueid.Format(opaqueid.Workspace, c.WorkspaceID)
	return client{workspaceID: c.WorkspaceID, id: c.ID, scopes: c.Scopes, generation: c.SecretGeneration, writeRate: c.WriteRate}, nil
}

// failed records a failed client authentication, spending it from the
// failure buckets through the request's attempt.
func (s *Service) failed(ctx context.Context, attempt *ratelimit.Attempt, clientID, reason string) {
	source := ratelimit.SourceFrom(ctx)
	key := ratelimit.ClientKey(clientID)
	attempt.Failed()
	metrics.AuthFailures.WithLabelValues(reason).Inc()
	requestid.InfoFrom(ctx).AuthFailure = reason
	if s.Log != nil {
		// The presented id is logged only when it has the shape of a
		// client id: anything else may be a misplaced secret.
		logged := ""
		if key != "" {
			logged = clientID
		}
		s.Log.WarnContext(ctx, "client authentication failed", "client_id", logged, "source", source,
			"reason", reason, "request_id", requestid.FromContext(ctx))
	}
}

// invalidClient is a 401. The Basic challenge is always sent: RFC 9110
// requires WWW-Authenticate on every 401, and RFC 6749 §5.2 requires it
// when the client tried Basic.
// refused is a client authentication refused before any client was
// looked up (the Authorization header itself is wrong), with the reason
// the log and partner_auth_failures_total name.
type refused struct {
	reason string
	err    *apierror.Error
}

func (r refused) Error() string { return r.err.Error() }
func (r refused) Unwrap() error { return r.err }

// countRefused logs and counts a [refused] authentication. It spends
// nothing from the failure buckets: no secret was tried.
func countRefused(ctx context.Context, err error) {
	var r refused
	if errors.As(err, &r) {
		metrics.AuthFailures.WithLabelValues(r.reason).Inc()
		requestid.InfoFrom(ctx).AuthFailure = r.reason
	}
}

func invalidClient(msg string) *apierror.Error {
	return &apierror.Error{Code: apierror.CodeInvalidClient, Message: msg, Challenge: apierror.BasicChallenge}
}

func serverError(cause error) *apierror.Error {
	return &apierror.Error{Code: apierror.CodeServerError, Message: "the authorization server could not process the request", Cause: cause}
}

// noStore sets the cache headers RFC 6749 §5.1 requires on token responses.
func noStore(h interface{ Set(string, string) }) {
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
