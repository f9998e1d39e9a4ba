// Package identity implements partner.identity.v1.IdentityService:
// GET /api/v1/me describes the caller's token.
package identity

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	identityv1 "github.com/svat/partnerapi/gen/partner/identity/v1"
	"github.com/svat/partnerapi/gen/partner/identity/v1/identityv1connect"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/auth"
)

// Service answers from the principal the bearer interceptor verified; it
// needs no query of its own.
type Service struct{}

var _ identityv1connect.IdentityServiceHandler = Service{}

// GetMe returns the workspace, the app, the scopes and the expiry of the
// token.
func (Service) GetMe(ctx context.Context, _ *connect.Request[identityv1.GetMeRequest]) (*connect.Response[identityv1.GetMeResponse], error) {
	p := auth.FromContext(ctx)
	return connect.NewResponse(&identityv1.GetMeResponse{
		Workspace:      &identityv1.Workspace{Id: opaqueid.Format(opaqueid.Workspace, p.WorkspaceID), Name: p.WorkspaceName},
		App:            &identityv1.App{ClientId: opaqueid.Format(opaqueid.Client, p.ClientID), Name: p.ClientName},
		Scopes:         p.Scopes.Names(),
		TokenExpiresAt: timestamppb.New(p.ExpiresAt.UTC()),
	}), nil
}
