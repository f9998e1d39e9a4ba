package admin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/records/validate"
	"github.com/svat/partnerapi/internal/security/secret"
)

// Audit actions of the workspace settings page.
const (
	// ActionSignInLink is the operator's (or the CRM's) request for a
	// member's sign-in link.
	ActionSignInLink = "member.create_sign_in_link"
	// ActionSettingsSignIn is a member opening a sign-in link.
	ActionSettingsSignIn = "settings.sign_in"
	// ActionSettingsSignOut is a member's "Sign out".
	ActionSettingsSignOut = "settings.sign_out"
)

// MaxSignInLinkTTL bounds how long a sign-in link works, and is its
// default.
const MaxSignInLinkTTL = 5 * time.Minute

// SignInPath is the path, under the settings base, that redeems a code.
const SignInPath = "/sign-in"

// CreateSignInLink makes a one-time sign-in link to the settings page for
// an approved member with settings access. Only the code's hash is
// stored; the code itself is in the answer alone.
func (s *Service) CreateSignInLink(ctx context.Context, req *connect.Request[adminv1.CreateSignInLinkRequest]) (*connect.Response[adminv1.CreateSignInLinkResponse], error) {
	id, err := parseID("memberId", opaqueid.Member, req.Msg.GetMemberId())
	if err != nil {
		return nil, err
	}
	ttl := MaxSignInLinkTTL
	if d := req.Msg.GetTtl(); d != nil {
		ttl = d.AsDuration()
		if !d.IsValid() || ttl < time.Second || ttl > MaxSignInLinkTTL {
			return nil, apierror.Validation(apierror.FieldViolation{Field: "ttl", Code: validate.InvalidValue, Message: "must be from 1s to 5m"})
		}
	}
	base := s.SettingsURL
	if base == "" {
		base = RequestBase(ctx)
	}
	if base == "" {
		return nil, apierror.New(apierror.CodeFailedPrecondition, "set PARTNER_SETTINGS_URL: the settings page's public URL is not known")
	}
	code, hash := NewSignInCode()
	now := s.now()
	expires := now.Add(ttl)
	var m dbsqlc.Member
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		m, err = db.Q.SettingsMemberByID(ctx, tx, id)
		if errors.Is(err, db.ErrNotFound) {
			return apierror.New(apierror.CodeNotFound, "member not found")
		}
		if err != nil {
			return fmt.Errorf("get member: %w", err)
		}
		if !m.Approved {
			return refuse(ReasonNotApproved, apierror.CodePermissionDenied, "the member is not approved yet")
		}
		if !m.SettingsAccess {
			return refuse(ReasonNoSettingsAccess, apierror.CodePermissionDenied, "the member has no settings access")
		}
		if err := db.Q.SettingsSignInCodeCreate(ctx, tx, dbsqlc.SettingsSignInCodeCreateParams{
			CodeHash: hash[:], WorkspaceID: m.WorkspaceID, MemberID: m.ID, Now: now, ExpiresAt: expires,
		}); err != nil {
			return fmt.Errorf("create sign-in code: %w", err)
		}
		// Codes that can no longer be used are forgotten here, a few at
		// a time: links are made one by one, so this keeps pace.
		if _, err := db.Q.SettingsSignInCodeDeleteExpired(ctx, tx, dbsqlc.SettingsSignInCodeDeleteExpiredParams{
			Before: now.Add(-24 * time.Hour), MaxRows: 100,
		}); err != nil {
			return fmt.Errorf("delete expired sign-in codes: %w", err)
		}
		return audit(ctx, tx, event{workspace: m.WorkspaceID, action: ActionSignInLink, member: &m.ID})
	})
	if err != nil {
		return nil, s.auditRefusal(ctx, err, event{workspace: m.WorkspaceID, action: ActionSignInLink, member: &id})
	}
	return connect.NewResponse(&adminv1.CreateSignInLinkResponse{
		Url:       strings.TrimSuffix(base, "/") + SignInPath + "?code=" + code,
		ExpiresAt: timestamppb.New(expires),
	}), nil
}

// NewSignInCode returns a fresh sign-in code (32 random bytes, base64url)
// and its hash, the only form stored.
func NewSignInCode() (code string, hash secret.Hash) {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand contract since Go 1.24)
	code = base64.RawURLEncoding.EncodeToString(raw[:])
	return code, secret.HashOf(code)
}

// RecordMemberAction audits an action a member took on the settings page
// outside the client management calls (signing in and out), in tx.
func RecordMemberAction(ctx context.Context, tx db.DBTX, workspace, member uuid.UUID, action string) error {
	return audit(ctx, tx, event{workspace: workspace, actor: &member, action: action})
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

type requestBaseKey struct{}

// WithRequestBase puts the settings page's URL on this listener, as the
// request reached it (http or https, Host, "/settings"), in the request's
// context: CreateSignInLink's link when PARTNER_SETTINGS_URL is not set.
func WithRequestBase(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		if r.Host != "" {
			r = r.WithContext(context.WithValue(r.Context(), requestBaseKey{}, scheme+"://"+r.Host+"/settings"))
		}
		next.ServeHTTP(w, r)
	})
}

// RequestBase is what WithRequestBase stored, or "".
func RequestBase(ctx context.Context) string {
	s, _ := ctx.Value(requestBaseKey{}).(string)
	return s
}
