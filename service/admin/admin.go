// Package admin implements partner.admin.v1.AdminService, the workspace
// settings surface for API clients. It runs on the admin listener only.
//
// Every client management call names the acting member, who must be
// approved, have settings access and belong to the client's workspace.
// Every management action is written to the audit log in the same
// transaction as the change itself. A refused attempt is written too, with
// outcome "refused" and the reason, in a statement of its own after the
// attempt's transaction rolled back: an attempt nobody may make is what an
// audit log is for. Reading the audit log is audited as well.
package admin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/records/validate"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/scope"
	"github.com/svat/partnerapi/internal/security/secret"
)

// Client statuses.
const (
	StatusActive   = "active"
	StatusInactive = "inactive"
	StatusRevoked  = "revoked"
)

// Audit actions.
const (
	ActionCreate     = "api_client.create"
	ActionList       = "api_client.list"
	ActionRotate     = "api_client.rotate_secret"
	ActionDeactivate = "api_client.deactivate"
	ActionActivate   = "api_client.activate"
	ActionRevoke     = "api_client.revoke"
	ActionSetRates   = "api_client.set_rates"
	// ActionRevokeTokens is written with ActionDeactivate when the
	// deactivation also ended the client's tokens (revoke_tokens).
	ActionRevokeTokens = "api_client.revoke_tokens"
	// ActionDisableWebhooks is written with ActionRotate, ActionDeactivate
	// or ActionRevoke when the member asked that every webhook endpoint of
	// the client be disabled (disable_webhooks): after a leak.
	ActionDisableWebhooks = "api_client.disable_webhooks"
	// ActionAuditList is a read of the audit log: who looked at it.
	ActionAuditList = "audit_event.list"
	// The operator's bootstrap actions: no member acts.
	ActionWorkspaceCreate = "workspace.create"
	ActionMemberAdd       = "member.add"
	// ActionMemberSettingsAccess is a grant or withdrawal of a member's
	// settings access by the operator.
	ActionMemberSettingsAccess = "member.set_settings_access"
)

// Outcomes of an audit event.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeRefused   = "refused"
)

// Reasons of a refused attempt. They are codes of ours, never the caller's
// text, so what a refused attempt stores is bounded.
const (
	// ReasonNotAMember: the acting member is not one of the workspace's
	// (a member of another workspace, or an id that names no member).
	ReasonNotAMember = "not_a_member"
	// ReasonNotApproved: the member is pending approval.
	ReasonNotApproved = "not_approved"
	// ReasonNoSettingsAccess: the member may not manage API clients.
	ReasonNoSettingsAccess = "no_settings_access"
	// ReasonClientRevoked: the client is revoked, which is final.
	ReasonClientRevoked = "client_revoked"
)

// MaxRate bounds a client's own rate limits, in requests per second.
const MaxRate = 1_000_000

// Service is the admin service.
type Service struct {
	DB *db.DB
	// Sync lets token caches catch up after a change that invalidates
	// tokens, before the change is acknowledged.
	Sync auth.Syncer
	// Now is the clock of sign-in links; nil means time.Now.
	Now func() time.Time
	// SettingsURL is the public base of the settings page
	// (PARTNER_SETTINGS_URL), without a trailing slash; empty means the
	// admin listener's own /settings, as the request for a link reached
	// it ([WithRequestBase]).
	SettingsURL string
	// WebhooksChanged, when set, tells this replica's delivery engine
	// that an endpoint was enabled again, so that it resumes at once
	// rather than at its next poll.
	WebhooksChanged func()
}

var _ adminv1connect.AdminServiceHandler = (*Service)(nil)

// CreateWorkspace bootstraps a workspace.
func (s *Service) CreateWorkspace(ctx context.Context, req *connect.Request[adminv1.CreateWorkspaceRequest]) (*connect.Response[adminv1.CreateWorkspaceResponse], error) {
	name, err := displayName("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	var w dbsqlc.Workspace
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		w, err = db.Q.WorkspaceCreate(ctx, tx, dbsqlc.WorkspaceCreateParams{ID: opaqueid.New(), Name: name})
		if err != nil {
			return fmt.Errorf("create workspace: %w", err)
		}
		return audit(ctx, tx, event{workspace: w.ID, action: ActionWorkspaceCreate})
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&adminv1.CreateWorkspaceResponse{
		Id: opaqueid.Format(opaqueid.Workspace, w.ID), Name: w.Name, CreatedAt: timestamppb.New(w.CreatedAt),
	}), nil
}

// AddMember bootstraps a member.
func (s *Service) AddMember(ctx context.Context, req *connect.Request[adminv1.AddMemberRequest]) (*connect.Response[adminv1.AddMemberResponse], error) {
	wsID, err := parseID("workspaceId", opaqueid.Workspace, req.Msg.GetWorkspaceId())
	if err != nil {
		return nil, err
	}
	var v validate.Errors
	raw := req.Msg.GetEmail()
	email := v.Email("email", &raw)
	if email == nil {
		v.Add("email", validate.Required, "is required")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	var m dbsqlc.Member
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		m, err = db.Q.MemberCreate(ctx, tx, dbsqlc.MemberCreateParams{
			WorkspaceID: wsID, ID: opaqueid.New(), Email: *email,
			Approved: !req.Msg.GetPending(), SettingsAccess: req.Msg.GetSettingsAccess(),
		})
		var conflict *db.ConflictError
		switch {
		case errors.As(err, &conflict) && conflict.ForeignKey:
			return apierror.New(apierror.CodeNotFound, "workspace not found")
		case errors.As(err, &conflict):
			return errMemberExists
		case err != nil:
			return fmt.Errorf("create member: %w", err)
		}
		return audit(ctx, tx, event{workspace: wsID, action: ActionMemberAdd, member: &m.ID})
	})
	if errors.Is(err, errMemberExists) {
		return nil, s.memberExists(ctx, wsID, *email)
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&adminv1.AddMemberResponse{
		Id: opaqueid.Format(opaqueid.Member, m.ID), WorkspaceId: opaqueid.Format(opaqueid.Workspace, m.WorkspaceID),
		Email: m.Email, Approved: m.Approved, SettingsAccess: m.SettingsAccess, CreatedAt: timestamppb.New(m.CreatedAt),
	}), nil
}

// errMemberExists marks AddMember's unique violation; the member it
// collides with is read once the transaction has rolled back.
var errMemberExists = errors.New("member exists")

// memberExists is AddMember's duplicate answer. It carries the existing
// member's id, in the message and as the existing id, so that an operator
// who lost it can go on.
func (s *Service) memberExists(ctx context.Context, wsID uuid.UUID, email string) error {
	m, err := db.Q.MemberGetByEmail(ctx, s.DB.Conn(), dbsqlc.MemberGetByEmailParams{WorkspaceID: wsID, Email: email})
	if err != nil {
		return fmt.Errorf("get existing member: %w", err)
	}
	id := opaqueid.Format(opaqueid.Member, m.ID)
	e := apierror.New(apierror.CodeDuplicate, "the workspace already has a member with this email: "+id)
	e.ExistingID = id
	return e
}

// ListWorkspaces lists every workspace, oldest first, for operators.
func (s *Service) ListWorkspaces(ctx context.Context, req *connect.Request[adminv1.ListWorkspacesRequest]) (*connect.Response[adminv1.ListWorkspacesResponse], error) {
	limit, after, err := page(req.Msg.GetLimit(), req.Msg.GetPageToken(), opaqueid.Workspace)
	if err != nil {
		return nil, err
	}
	rows, err := db.Q.WorkspaceList(ctx, s.DB.Conn(), dbsqlc.WorkspaceListParams{AfterID: after, MaxRows: limit + 1})
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	out := &adminv1.ListWorkspacesResponse{}
	if len(rows) > int(limit) {
		rows = rows[:limit]
		out.NextPageToken = opaqueid.Format(opaqueid.Workspace, rows[len(rows)-1].ID)
	}
	out.Workspaces = make([]*adminv1.Workspace, 0, len(rows))
	for _, w := range rows {
		out.Workspaces = append(out.Workspaces, &adminv1.Workspace{
			Id: opaqueid.Format(opaqueid.Workspace, w.ID), Name: w.Name, CreatedAt: timestamppb.New(w.CreatedAt),
		})
	}
	return connect.NewResponse(out), nil
}

// ListMembers lists a workspace's members, oldest first, for operators.
func (s *Service) ListMembers(ctx context.Context, req *connect.Request[adminv1.ListMembersRequest]) (*connect.Response[adminv1.ListMembersResponse], error) {
	wsID, err := parseID("workspaceId", opaqueid.Workspace, req.Msg.GetWorkspaceId())
	if err != nil {
		return nil, err
	}
	limit, after, err := page(req.Msg.GetLimit(), req.Msg.GetPageToken(), opaqueid.Member)
	if err != nil {
		return nil, err
	}
	var rows []dbsqlc.Member
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		if _, err := db.Q.WorkspaceGet(ctx, tx, wsID); errors.Is(err, db.ErrNotFound) {
			return apierror.New(apierror.CodeNotFound, "workspace not found")
		} else if err != nil {
			return fmt.Errorf("get workspace: %w", err)
		}
		rows, err = db.Q.MemberList(ctx, tx, dbsqlc.MemberListParams{WorkspaceID: wsID, AfterID: after, MaxRows: limit + 1})
		if err != nil {
			return fmt.Errorf("list members: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := &adminv1.ListMembersResponse{}
	if len(rows) > int(limit) {
		rows = rows[:limit]
		out.NextPageToken = opaqueid.Format(opaqueid.Member, rows[len(rows)-1].ID)
	}
	out.Members = make([]*adminv1.Member, 0, len(rows))
	for _, m := range rows {
		out.Members = append(out.Members, memberProto(m))
	}
	return connect.NewResponse(out), nil
}

// SetMemberSettingsAccess grants or withdraws a member's settings access,
// audited in the same transaction. The access is checked on every
// management call ([authorize]), so a withdrawal holds from the next one.
func (s *Service) SetMemberSettingsAccess(ctx context.Context, req *connect.Request[adminv1.SetMemberSettingsAccessRequest]) (*connect.Response[adminv1.SetMemberSettingsAccessResponse], error) {
	id, err := parseID("memberId", opaqueid.Member, req.Msg.GetMemberId())
	if err != nil {
		return nil, err
	}
	var m dbsqlc.Member
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		m, err = db.Q.MemberSetSettingsAccess(ctx, tx, dbsqlc.MemberSetSettingsAccessParams{ID: id, SettingsAccess: req.Msg.GetSettingsAccess()})
		if errors.Is(err, db.ErrNotFound) {
			return apierror.New(apierror.CodeNotFound, "member not found")
		}
		if err != nil {
			return fmt.Errorf("set settings access: %w", err)
		}
		return audit(ctx, tx, event{workspace: m.WorkspaceID, action: ActionMemberSettingsAccess, member: &m.ID})
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&adminv1.SetMemberSettingsAccessResponse{Member: memberProto(m)}), nil
}

// page reads an operator list's limit (1 to 500, 100 when zero) and page
// token (the last id of the previous page).
func page(limit int32, token, prefix string) (int32, *uuid.UUID, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return 0, nil, err
	}
	if token == "" {
		return limit, nil, nil
	}
	id, ok := opaqueid.Parse(prefix, token)
	if !ok {
		return 0, nil, apierror.Validation(apierror.FieldViolation{Field: "pageToken", Code: validate.InvalidFormat, Message: "must be the nextPageToken of a previous page"})
	}
	return limit, &id, nil
}

// pageLimit is the page size of an admin list: 1 to 500, 100 when zero.
func pageLimit(limit int32) (int32, error) {
	if limit == 0 {
		return 100, nil
	}
	if limit < 1 || limit > 500 {
		return 0, apierror.Validation(apierror.FieldViolation{Field: "limit", Code: validate.InvalidValue, Message: "must be from 1 to 500"})
	}
	return limit, nil
}

func memberProto(m dbsqlc.Member) *adminv1.Member {
	return &adminv1.Member{
		Id: opaqueid.Format(opaqueid.Member, m.ID), WorkspaceId: opaqueid.Format(opaqueid.Workspace, m.WorkspaceID),
		Email: m.Email, Approved: m.Approved, SettingsAccess: m.SettingsAccess, CreatedAt: timestamppb.New(m.CreatedAt),
	}
}

// CheckCreateApiClient checks the fields of a client to create (its name,
// scopes, redirect URIs and rates; not the ids) as CreateApiClient does,
// and returns every violation at once: the settings page shows each next
// to its field before it asks for the create.
func CheckCreateApiClient(m *adminv1.CreateApiClientRequest) error {
	_, _, _, _, _, err := createFields(m)
	return err
}

// createFields reads the fields of a client to create, each of them: one
// validation error names every field that is wrong.
func createFields(m *adminv1.CreateApiClientRequest) (name string, scopes scope.Set, uris []string, readRate, writeRate *int32, err error) {
	var bad []apierror.FieldViolation
	collect := func(err error) {
		var e *apierror.Error
		if errors.As(err, &e) {
			bad = append(bad, e.Fields...)
		}
	}
	name, err = displayName("name", m.GetName())
	collect(err)
	scopes, err = clientScopes(m.GetScopes())
	collect(err)
	uris, err = redirectURIs(m.GetRedirectUris())
	collect(err)
	readRate, err = oneRate("readRate", m.ReadRate)
	collect(err)
	writeRate, err = oneRate("writeRate", m.WriteRate)
	collect(err)
	if len(bad) > 0 {
		return "", 0, nil, nil, nil, apierror.Validation(bad...)
	}
	return name, scopes, uris, readRate, writeRate, nil
}

// oneRate reads one rate of a new client: absent or 0 is the server
// default.
func oneRate(field string, v *int32) (*int32, error) {
	if field == "readRate" {
		r, _, err := rates(v, nil, nil, nil)
		return r, err
	}
	_, w, err := rates(nil, v, nil, nil)
	return w, err
}

// CreateApiClient creates a client and returns its one-time secret.
func (s *Service) CreateApiClient(ctx context.Context, req *connect.Request[adminv1.CreateApiClientRequest]) (*connect.Response[adminv1.CreateApiClientResponse], error) {
	m := req.Msg
	wsID, err := parseID("workspaceId", opaqueid.Workspace, m.GetWorkspaceId())
	if err != nil {
		return nil, err
	}
	memberID, err := parseID("memberId", opaqueid.Member, m.GetMemberId())
	if err != nil {
		return nil, err
	}
	name, scopes, uris, readRate, writeRate, err := createFields(m)
	if err != nil {
		return nil, err
	}
	sec, hash := secret.NewClientSecret()
	var created dbsqlc.ApiClient
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		if err := authorize(ctx, tx, wsID, memberID); err != nil {
			return err
		}
		created, err = db.Q.APIClientCreate(ctx, tx, dbsqlc.APIClientCreateParams{
			WorkspaceID: wsID, ID: opaqueid.New(), Name: name, SecretHash: hash[:],
			Scopes: scopes.Names(), RedirectUris: uris, CreatedBy: memberID, ReadRate: readRate, WriteRate: writeRate,
		})
		if err != nil {
			return fmt.Errorf("create api client: %w", err)
		}
		return audit(ctx, tx, event{workspace: wsID, actor: &memberID, action: ActionCreate, client: &created.ID})
	})
	if err != nil {
		return nil, s.auditRefusal(ctx, err, event{workspace: wsID, actor: &memberID, action: ActionCreate})
	}
	c := toProto(created)
	return connect.NewResponse(&adminv1.CreateApiClientResponse{ClientId: c.ClientId, ClientSecret: sec, Client: c}), nil
}

// ListApiClients lists a workspace's clients, never with a secret.
func (s *Service) ListApiClients(ctx context.Context, req *connect.Request[adminv1.ListApiClientsRequest]) (*connect.Response[adminv1.ListApiClientsResponse], error) {
	wsID, err := parseID("workspaceId", opaqueid.Workspace, req.Msg.GetWorkspaceId())
	if err != nil {
		return nil, err
	}
	memberID, err := parseID("memberId", opaqueid.Member, req.Msg.GetMemberId())
	if err != nil {
		return nil, err
	}
	var rows []dbsqlc.ApiClient
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		if err := authorize(ctx, tx, wsID, memberID); err != nil {
			return err
		}
		rows, err = db.Q.APIClientList(ctx, tx, wsID)
		if err != nil {
			return fmt.Errorf("list api clients: %w", err)
		}
		return audit(ctx, tx, event{workspace: wsID, actor: &memberID, action: ActionList})
	})
	if err != nil {
		return nil, s.auditRefusal(ctx, err, event{workspace: wsID, actor: &memberID, action: ActionList})
	}
	out := &adminv1.ListApiClientsResponse{Clients: make([]*adminv1.ApiClient, 0, len(rows))}
	for _, r := range rows {
		out.Clients = append(out.Clients, toProto(r))
	}
	return connect.NewResponse(out), nil
}

// RotateApiClientSecret replaces the secret and revokes every token of the
// client, in one transaction. With disable_webhooks the same transaction
// disables every webhook endpoint of the client (credentials_revoked):
// whoever held a leaked secret may have made one, and a rotation alone
// leaves it receiving.
func (s *Service) RotateApiClientSecret(ctx context.Context, req *connect.Request[adminv1.RotateApiClientSecretRequest]) (*connect.Response[adminv1.RotateApiClientSecretResponse], error) {
	sec, hash := secret.NewClientSecret()
	disable := req.Msg.GetDisableWebhooks()
	c, err := s.change(ctx, req.Msg.GetMemberId(), req.Msg.GetClientId(), ActionRotate, func(tx db.DBTX, c dbsqlc.ApiClient) (dbsqlc.ApiClient, error) {
		if c.Status == StatusRevoked {
			return c, errRevoked()
		}
		c, err := db.Q.APIClientSetSecret(ctx, tx, dbsqlc.APIClientSetSecretParams{SecretHash: hash[:], WorkspaceID: c.WorkspaceID, ID: c.ID})
		if err != nil {
			return c, fmt.Errorf("set client secret: %w", err)
		}
		if disable {
			if err := disableWebhooks(ctx, tx, c); err != nil {
				return c, err
			}
		}
		return c, revokeTokens(ctx, tx, c)
	}, thenIf(disable, ActionDisableWebhooks)...)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&adminv1.RotateApiClientSecretResponse{ClientId: c.ClientId, ClientSecret: sec, Client: c}), nil
}

// DeactivateApiClient suspends the client. Plain deactivation is a pause
// (product.md: it is reversible), so a later activation makes every token
// that was not otherwise revoked work again, a leaked one included. With
// revoke_tokens it also ends every token of the client in the same
// transaction, for a member who deactivates because a token leaked: the
// tokens are revoked, and the client's secret generation moves on, as a
// rotation's does but keeping the secret, so that a token whose batched
// INSERT lands after the commit is not current either, and activation
// brings none of them back.
//
// disable_webhooks, with revoke_tokens, also disables every webhook
// endpoint of the client in the transaction (credentials_revoked), which
// a later activation does not undo. Without revoke_tokens it is refused:
// a plain deactivation is a pause, which pauses the endpoints as well.
func (s *Service) DeactivateApiClient(ctx context.Context, req *connect.Request[adminv1.DeactivateApiClientRequest]) (*connect.Response[adminv1.DeactivateApiClientResponse], error) {
	m := req.Msg
	if m.GetDisableWebhooks() && !m.GetRevokeTokens() {
		return nil, apierror.Validation(apierror.FieldViolation{Field: "disableWebhooks", Code: validate.InvalidValue,
			Message: "needs revokeTokens: a plain deactivation is a pause, which pauses the webhook endpoints too; end the tokens to disable them"})
	}
	if !m.GetRevokeTokens() {
		c, err := s.setStatus(ctx, m.GetMemberId(), m.GetClientId(), ActionDeactivate, StatusInactive)
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(&adminv1.DeactivateApiClientResponse{Client: c}), nil
	}
	c, err := s.change(ctx, m.GetMemberId(), m.GetClientId(), ActionDeactivate, func(tx db.DBTX, c dbsqlc.ApiClient) (dbsqlc.ApiClient, error) {
		if c.Status == StatusRevoked {
			return c, errRevoked()
		}
		c, err := db.Q.APIClientSetStatus(ctx, tx, dbsqlc.APIClientSetStatusParams{Status: StatusInactive, WorkspaceID: c.WorkspaceID, ID: c.ID})
		if err != nil {
			return c, fmt.Errorf("set client status: %w", err)
		}
		if c, err = db.Q.APIClientEndTokens(ctx, tx, dbsqlc.APIClientEndTokensParams{WorkspaceID: c.WorkspaceID, ID: c.ID}); err != nil {
			return c, fmt.Errorf("end client tokens: %w", err)
		}
		if m.GetDisableWebhooks() {
			if err := disableWebhooks(ctx, tx, c); err != nil {
				return c, err
			}
		}
		return c, revokeTokens(ctx, tx, c)
	}, append([]string{ActionRevokeTokens}, thenIf(m.GetDisableWebhooks(), ActionDisableWebhooks)...)...)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&adminv1.DeactivateApiClientResponse{Client: c}), nil
}

// ActivateApiClient lifts a deactivation.
func (s *Service) ActivateApiClient(ctx context.Context, req *connect.Request[adminv1.ActivateApiClientRequest]) (*connect.Response[adminv1.ActivateApiClientResponse], error) {
	c, err := s.setStatus(ctx, req.Msg.GetMemberId(), req.Msg.GetClientId(), ActionActivate, StatusActive)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&adminv1.ActivateApiClientResponse{Client: c}), nil
}

// SetApiClientRates sets or clears the client's own rate limits. Replicas
// hear of the change through the token cache's invalidation (the rates
// travel with every token check), so it applies to tokens already issued.
func (s *Service) SetApiClientRates(ctx context.Context, req *connect.Request[adminv1.SetApiClientRatesRequest]) (*connect.Response[adminv1.SetApiClientRatesResponse], error) {
	m := req.Msg
	if m.ReadRate == nil && m.WriteRate == nil {
		return nil, apierror.Validation(apierror.FieldViolation{Field: "readRate", Code: validate.Required, Message: "set readRate, writeRate or both"})
	}
	c, err := s.change(ctx, m.GetMemberId(), m.GetClientId(), ActionSetRates, func(tx db.DBTX, c dbsqlc.ApiClient) (dbsqlc.ApiClient, error) {
		readRate, writeRate, err := rates(m.ReadRate, m.WriteRate, c.ReadRate, c.WriteRate)
		if err != nil {
			return c, err
		}
		c, err = db.Q.APIClientSetRates(ctx, tx, dbsqlc.APIClientSetRatesParams{ReadRate: readRate, WriteRate: writeRate, WorkspaceID: c.WorkspaceID, ID: c.ID})
		if err != nil {
			return c, fmt.Errorf("set client rates: %w", err)
		}
		return c, nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&adminv1.SetApiClientRatesResponse{Client: c}), nil
}

// rates validates requested rates: nil keeps the current value, 0 clears
// it (the server default), 1 to MaxRate sets it.
func rates(read, write, currentRead, currentWrite *int32) (*int32, *int32, error) {
	pick := func(field string, want, current *int32) (*int32, error) {
		switch {
		case want == nil:
			return current, nil
		case *want == 0:
			return nil, nil
		case *want < 0 || *want > MaxRate:
			return nil, apierror.Validation(apierror.FieldViolation{Field: field, Code: validate.InvalidValue,
				Message: fmt.Sprintf("must be from 1 to %d requests per second, or 0 for the server default", MaxRate)})
		}
		v := *want
		return &v, nil
	}
	r, err := pick("readRate", read, currentRead)
	if err != nil {
		return nil, nil, err
	}
	w, err := pick("writeRate", write, currentWrite)
	if err != nil {
		return nil, nil, err
	}
	return r, w, nil
}

// RevokeApiClient revokes the client and its tokens for good, and
// disables its webhook endpoints for good (client_revoked), whether or not
// disable_webhooks is set: the flag is taken, and audited, so that one
// request works with rotate, deactivate and revoke alike. Revoking a
// revoked client changes nothing and succeeds.
func (s *Service) RevokeApiClient(ctx context.Context, req *connect.Request[adminv1.RevokeApiClientRequest]) (*connect.Response[adminv1.RevokeApiClientResponse], error) {
	c, err := s.setStatus(ctx, req.Msg.GetMemberId(), req.Msg.GetClientId(), ActionRevoke, StatusRevoked,
		thenIf(req.Msg.GetDisableWebhooks(), ActionDisableWebhooks)...)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&adminv1.RevokeApiClientResponse{Client: c}), nil
}

// ListAuditEvents lists management actions and refused attempts, newest
// first, with the names beside the ids and the actor of each (a member,
// an API client acting with its own token, or the operator), filtered by
// action, actor, client and changes or reads when asked. The read itself
// is audited (ActionAuditList), so a workspace can tell who has seen its
// log.
func (s *Service) ListAuditEvents(ctx context.Context, req *connect.Request[adminv1.ListAuditEventsRequest]) (*connect.Response[adminv1.ListAuditEventsResponse], error) {
	wsID, err := parseID("workspaceId", opaqueid.Workspace, req.Msg.GetWorkspaceId())
	if err != nil {
		return nil, err
	}
	memberID, err := parseID("memberId", opaqueid.Member, req.Msg.GetMemberId())
	if err != nil {
		return nil, err
	}
	limit, err := pageLimit(req.Msg.GetLimit())
	if err != nil {
		return nil, err
	}
	params, err := auditFilter(req.Msg)
	if err != nil {
		return nil, err
	}
	params.WorkspaceID, params.MaxRows = wsID, limit+1 // one more row tells whether another page follows
	// The read is audited in its transaction, after the page is read: the
	// page shows what there was when it was asked for, and a read that
	// cannot be audited is not answered.
	var rows []dbsqlc.AuditEventListRow
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		if err := authorize(ctx, tx, wsID, memberID); err != nil {
			return err
		}
		// Planned for the filters at hand: each folds into its index.
		rows, err = db.Q.AuditEventList(ctx, db.PlannedTx(tx), params)
		if err != nil {
			return fmt.Errorf("list audit events: %w", err)
		}
		return audit(ctx, tx, event{workspace: wsID, actor: &memberID, action: ActionAuditList})
	})
	if err != nil {
		return nil, s.auditRefusal(ctx, err, event{workspace: wsID, actor: &memberID, action: ActionAuditList})
	}
	out := &adminv1.ListAuditEventsResponse{}
	if len(rows) > int(limit) {
		rows = rows[:limit]
		out.NextPageToken = FormatAuditID(rows[len(rows)-1].AuditEvent.ID)
	}
	out.Events = make([]*adminv1.AuditEvent, 0, len(rows))
	for _, row := range rows {
		out.Events = append(out.Events, auditProto(row))
	}
	return connect.NewResponse(out), nil
}

// Actor types of an audit event (AuditEvent.actor_type).
const (
	ActorMember   = "member"
	ActorClient   = "client"
	ActorOperator = "operator"
)

// Kinds of events a list is filtered to (ListAuditEventsRequest.kind).
const (
	KindChanges = "changes"
	KindReads   = "reads"
)

// IsRead tells a read of the log from the rest: the reads are the
// actions named "….list" (ActionList, ActionWebhookList,
// ActionAuditList), the rule AuditEventList and the index
// audit_events_changes (migration 00151) apply too. A new read action is
// named the same way.
func IsRead(action string) bool { return strings.HasSuffix(action, ".list") }

// ActorType is who acted in an event with this acting member and client:
// the member; else the client, whose own change (made with its token,
// service/webhook) names it and no member; else the operator.
func ActorType(actorMember, client *uuid.UUID) string {
	switch {
	case actorMember != nil:
		return ActorMember
	case client != nil:
		return ActorClient
	}
	return ActorOperator
}

func auditProto(row dbsqlc.AuditEventListRow) *adminv1.AuditEvent {
	r := row.AuditEvent
	ev := &adminv1.AuditEvent{
		Id: FormatAuditID(r.ID), WorkspaceId: opaqueid.Format(opaqueid.Workspace, r.WorkspaceID),
		Action: r.Action, CreatedAt: timestamppb.New(r.CreatedAt), Outcome: r.Outcome,
		ActorType: ActorType(r.ActorMemberID, r.ClientID), Read: IsRead(r.Action),
	}
	if r.Reason != nil {
		ev.Reason = *r.Reason
	}
	if r.ActorMemberID != nil {
		ev.ActorMemberId = opaqueid.Format(opaqueid.Member, *r.ActorMemberID)
	}
	if r.ClientID != nil {
		ev.ClientId = opaqueid.Format(opaqueid.Client, *r.ClientID)
	}
	if r.MemberID != nil {
		ev.MemberId = opaqueid.Format(opaqueid.Member, *r.MemberID)
	}
	if r.TargetID != nil {
		ev.TargetId = *r.TargetID
	}
	if r.TokenHashPrefix != nil {
		ev.TokenHashPrefix = *r.TokenHashPrefix
	}
	if r.SourceAddress != nil {
		ev.SourceAddress = r.SourceAddress.String()
	}
	if row.ActorEmail != nil {
		ev.ActorEmail = *row.ActorEmail
	}
	if row.ClientName != nil {
		ev.ClientName = *row.ClientName
	}
	if row.MemberEmail != nil {
		ev.MemberEmail = *row.MemberEmail
	}
	return ev
}

// maxActionLen bounds the action filter: the longest action is far
// shorter.
const maxActionLen = 64

// auditFilter reads the filters of a list of audit events: every value
// checked and bounded, a violation per field, all of them at once.
func auditFilter(m *adminv1.ListAuditEventsRequest) (dbsqlc.AuditEventListParams, error) {
	var p dbsqlc.AuditEventListParams
	var bad []apierror.FieldViolation
	if t := m.GetPageToken(); t != "" {
		id, ok := AuditID(t)
		if !ok {
			bad = append(bad, apierror.FieldViolation{Field: "pageToken", Code: validate.InvalidFormat, Message: "must be the nextPageToken of a previous page"})
		}
		p.BeforeID = &id
	}
	if a := m.GetAction(); a != "" {
		if !actionName(a) {
			bad = append(bad, apierror.FieldViolation{Field: "action", Code: validate.InvalidFormat,
				Message: `must be an action such as "api_client.revoke": lower-case letters and "_" on either side of one "."`})
		}
		p.Action = &a
	}
	switch a := m.GetActor(); {
	case a == "":
	case a == ActorOperator:
		p.OperatorActor = true
	case strings.HasPrefix(a, opaqueid.Member):
		if id, ok := opaqueid.Parse(opaqueid.Member, a); ok {
			p.ActorMemberID = &id
		} else {
			bad = append(bad, apierror.FieldViolation{Field: "actor", Code: validate.InvalidFormat, Message: "must be a member id (mem_…), an API client id (cli_…) or operator"})
		}
	default:
		if id, ok := opaqueid.Parse(opaqueid.Client, a); ok {
			p.ActorClientID = &id
		} else {
			bad = append(bad, apierror.FieldViolation{Field: "actor", Code: validate.InvalidFormat, Message: "must be a member id (mem_…), an API client id (cli_…) or operator"})
		}
	}
	if c := m.GetClientId(); c != "" {
		if id, ok := opaqueid.Parse(opaqueid.Client, c); ok {
			p.ClientID = &id
		} else {
			bad = append(bad, apierror.FieldViolation{Field: "clientId", Code: validate.InvalidFormat, Message: "must be an API client id like " + opaqueid.Client + "…"})
		}
	}
	switch m.GetKind() {
	case "":
	case KindChanges:
		p.Reads = new(bool)
	case KindReads:
		reads := true
		p.Reads = &reads
	default:
		bad = append(bad, apierror.FieldViolation{Field: "kind", Code: validate.InvalidValue, Message: `must be "changes", "reads" or empty for both`})
	}
	if len(bad) > 0 {
		return p, apierror.Validation(bad...)
	}
	return p, nil
}

// actionName tells whether s could name an action: a noun and a verb of
// lower-case letters and "_", joined by one ".".
func actionName(s string) bool {
	noun, verb, ok := strings.Cut(s, ".")
	if !ok || len(s) > maxActionLen || noun == "" || verb == "" {
		return false
	}
	return strings.Trim(noun, "abcdefghijklmnopqrstuvwxyz_") == "" && strings.Trim(verb, "abcdefghijklmnopqrstuvwxyz_") == ""
}

// FormatAuditID renders an audit event's id, which is also the page
// token of the events older than it: opaqueid.Audit ("aud_") and the
// row's number.
func FormatAuditID(id int64) string { return opaqueid.Audit + strconv.FormatInt(id, 10) }

// AuditID reads an id FormatAuditID could have produced, or one release
// 1.1.0 did: it gave audit events the event feed's prefix, "evt_", and a
// page token it handed out still works here during a rolling upgrade
// and after it.
func AuditID(s string) (int64, bool) {
	digits, ok := strings.CutPrefix(s, opaqueid.Audit)
	if !ok {
		digits, ok = strings.CutPrefix(s, legacyAuditPrefix)
	}
	if !ok || digits == "" || digits[0] == '0' || len(digits) > 19 || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	return id, err == nil
}

// legacyAuditPrefix is the prefix releases up to 1.1.0 gave audit ids (the
// event feed's, opaqueid.Event), accepted on input; drop it once no page
// token of 1.1.0 can be held (PREVIOUS_RELEASE past 1.1.0, and a page
// token is a cursor of a session, not a stored id).
const legacyAuditPrefix = "evt_"

func (s *Service) setStatus(ctx context.Context, member, clientID, action, status string, then ...string) (*adminv1.ApiClient, error) {
	return s.change(ctx, member, clientID, action, func(tx db.DBTX, c dbsqlc.ApiClient) (dbsqlc.ApiClient, error) {
		if c.Status == StatusRevoked {
			if status == StatusRevoked {
				return c, nil
			}
			return c, errRevoked()
		}
		c, err := db.Q.APIClientSetStatus(ctx, tx, dbsqlc.APIClientSetStatusParams{Status: status, WorkspaceID: c.WorkspaceID, ID: c.ID})
		if err != nil {
			return c, fmt.Errorf("set client status: %w", err)
		}
		if status == StatusRevoked {
			// A revoked client's webhook endpoints are disabled for good
			// (an inactive one's only wait: the engine claims for active
			// clients alone).
			if _, err := db.Q.WebhookDisableForClient(ctx, tx, dbsqlc.WebhookDisableForClientParams{WorkspaceID: c.WorkspaceID, ClientID: c.ID}); err != nil {
				return c, fmt.Errorf("disable webhook endpoints: %w", err)
			}
			return c, revokeTokens(ctx, tx, c)
		}
		return c, nil
	}, then...)
}

// thenIf is the further action of a change when it did it.
func thenIf(did bool, action string) []string {
	if did {
		return []string{action}
	}
	return nil
}

// disableWebhooks disables every webhook endpoint of the client, in the
// transaction of the change that ends its credentials: reason
// credentials_revoked, which the client cannot undo (service/webhook) and
// which activating the client does not lift. Endpoints an administrator
// disabled, or of a revoked client, keep their reason.
func disableWebhooks(ctx context.Context, tx db.DBTX, c dbsqlc.ApiClient) error {
	if _, err := db.Q.WebhookAdminDisableForCredentials(ctx, tx, dbsqlc.WebhookAdminDisableForCredentialsParams{WorkspaceID: c.WorkspaceID, ClientID: c.ID}); err != nil {
		return fmt.Errorf("disable webhook endpoints: %w", err)
	}
	return nil
}

// change runs one audited change of a client on behalf of a member: the
// action, and then any further ones (then) that fn did too, are audited
// in its transaction; a refusal is audited as the action alone.
func (s *Service) change(ctx context.Context, member, clientID, action string, fn func(db.DBTX, dbsqlc.ApiClient) (dbsqlc.ApiClient, error), then ...string) (*adminv1.ApiClient, error) {
	memberID, err := parseID("memberId", opaqueid.Member, member)
	if err != nil {
		return nil, err
	}
	id, err := parseID("clientId", opaqueid.Client, clientID)
	if err != nil {
		return nil, err
	}
	var out dbsqlc.ApiClient
	var wsID uuid.UUID
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		wsID, err = db.Q.APIClientWorkspace(ctx, tx, id)
		if errors.Is(err, db.ErrNotFound) {
			return apierror.New(apierror.CodeNotFound, "api client not found")
		}
		if err != nil {
			return fmt.Errorf("find client workspace: %w", err)
		}
		if err := authorize(ctx, tx, wsID, memberID); err != nil {
			return err
		}
		c, err := db.Q.APIClientGetForUpdate(ctx, tx, dbsqlc.APIClientGetForUpdateParams{WorkspaceID: wsID, ID: id})
		if err != nil {
			return fmt.Errorf("get client: %w", err)
		}
		if out, err = fn(tx, c); err != nil {
			return err
		}
		for _, a := range append([]string{action}, then...) {
			if err := audit(ctx, tx, event{workspace: wsID, actor: &memberID, action: a, client: &id}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// wsID is known whenever a refusal can happen: the client exists.
		return nil, s.auditRefusal(ctx, err, event{workspace: wsID, actor: &memberID, action: action, client: &id})
	}
	if s.Sync != nil {
		s.Sync.Sync(ctx)
	}
	return toProto(out), nil
}

// authorize checks that the member belongs to the workspace, is approved
// and has settings access. Its refusals are [refusal]s: the caller audits
// them once its transaction is over.
func authorize(ctx context.Context, conn db.DBTX, wsID, memberID uuid.UUID) error {
	m, err := db.Q.MemberGet(ctx, conn, dbsqlc.MemberGetParams{WorkspaceID: wsID, ID: memberID})
	if errors.Is(err, db.ErrNotFound) {
		return refuse(ReasonNotAMember, apierror.CodePermissionDenied, "the member does not belong to this workspace")
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
	return nil
}

// errRevoked refuses any change of a revoked client but another
// revocation.
func errRevoked() error {
	return refuse(ReasonClientRevoked, apierror.CodeFailedPrecondition, "the client is revoked; revocation is final")
}

// refusal is a management attempt the rules refused: the caller's error,
// and the reason the audit log records. It is returned from inside the
// attempt's transaction, which then rolls back, so the audit event cannot
// be written there; [Service.auditRefusal] writes it afterwards.
type refusal struct {
	reason string
	err    *apierror.Error
}

func (r *refusal) Error() string { return r.err.Error() }

// Unwrap lets apierror.ToConnect find the domain error.
func (r *refusal) Unwrap() error { return r.err }

func refuse(reason, code, message string) error {
	return &refusal{reason: reason, err: apierror.New(code, message)}
}

// auditRefusal writes the audit event of a refused attempt, when err is a
// [refusal], in a statement of its own: the attempt's transaction has
// rolled back. It returns err, the caller's answer, or the failure to
// record the refusal: an attempt that cannot be audited is not answered
// as if it had been (it is refused either way).
func (s *Service) auditRefusal(ctx context.Context, err error, e event) error {
	var r *refusal
	if !errors.As(err, &r) {
		return err
	}
	if _, aerr := db.Q.AuditEventCreateRefused(ctx, s.DB.Conn(), dbsqlc.AuditEventCreateRefusedParams{
		WorkspaceID: e.workspace, ActorMemberID: e.actor, Action: e.action, ClientID: e.client, MemberID: e.member, Reason: r.reason,
	}); aerr != nil {
		return fmt.Errorf("write audit event of a refused attempt: %w", aerr)
	}
	return err
}

func revokeTokens(ctx context.Context, tx db.DBTX, c dbsqlc.ApiClient) error {
	if _, err := db.Q.AccessTokenRevokeAllOfClient(ctx, tx, dbsqlc.AccessTokenRevokeAllOfClientParams{WorkspaceID: c.WorkspaceID, ClientID: c.ID}); err != nil {
		return fmt.Errorf("revoke client tokens: %w", err)
	}
	return nil
}

// event is one audit log entry: who (a member, or nil for the operator),
// what, and which client or member it was about.
type event struct {
	workspace uuid.UUID
	actor     *uuid.UUID
	action    string
	client    *uuid.UUID
	member    *uuid.UUID
	// target is a webhook endpoint's opaque id, for its actions.
	target *string
}

func audit(ctx context.Context, tx db.DBTX, e event) error {
	if err := db.Q.AuditEventCreate(ctx, tx, dbsqlc.AuditEventCreateParams{
		WorkspaceID: e.workspace, ActorMemberID: e.actor, Action: e.action, ClientID: e.client, MemberID: e.member,
		TargetID: e.target,
	}); err != nil {
		return fmt.Errorf("write audit event: %w", err)
	}
	return nil
}

func toProto(c dbsqlc.ApiClient) *adminv1.ApiClient {
	out := &adminv1.ApiClient{
		ClientId: opaqueid.Format(opaqueid.Client, c.ID), WorkspaceId: opaqueid.Format(opaqueid.Workspace, c.WorkspaceID),
		Name: c.Name, Scopes: c.Scopes, Status: c.Status, RedirectUris: c.RedirectUris,
		CreatedBy: opaqueid.Format(opaqueid.Member, c.CreatedBy), CreatedAt: timestamppb.New(c.CreatedAt),
	}
	if c.SecretRotatedAt != nil {
		out.SecretRotatedAt = timestamppb.New(*c.SecretRotatedAt)
	}
	if c.RevokedAt != nil {
		out.RevokedAt = timestamppb.New(*c.RevokedAt)
	}
	if c.LastUsedAt != nil {
		out.LastUsedAt = timestamppb.New(*c.LastUsedAt)
	}
	out.ReadRate, out.WriteRate = c.ReadRate, c.WriteRate
	return out
}

func parseID(field, prefix, s string) (uuid.UUID, error) {
	id, ok := opaqueid.Parse(prefix, s)
	if !ok {
		return id, apierror.Validation(apierror.FieldViolation{Field: field, Code: validate.InvalidFormat, Message: "must be an id like " + prefix + "…"})
	}
	return id, nil
}

func displayName(field, s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || utf8.RuneCountInString(s) > 200 {
		return "", apierror.Validation(apierror.FieldViolation{Field: field, Code: validate.InvalidValue, Message: "must be 1 to 200 characters"})
	}
	// A name is shown in the CLI, audit views and the /me answer: no
	// control, bidirectional or invisible characters (validate.TextProblem).
	if problem := validate.TextProblem(s, validate.SingleLine); problem != "" {
		return "", apierror.Validation(apierror.FieldViolation{Field: field, Code: validate.InvalidFormat, Message: problem})
	}
	return s, nil
}

func clientScopes(names []string) (scope.Set, error) {
	set, unknown := scope.FromNames(names)
	if unknown != "" {
		return 0, apierror.Validation(apierror.FieldViolation{Field: "scopes", Code: validate.InvalidValue,
			Message: fmt.Sprintf("unknown scope %q; known scopes are %s", unknown, strings.Join(scope.Names(), ", "))})
	}
	if set == 0 {
		return 0, apierror.Validation(apierror.FieldViolation{Field: "scopes", Code: validate.Required, Message: "at least one scope is required"})
	}
	return set, nil
}

func redirectURIs(uris []string) ([]string, error) {
	if len(uris) > 10 {
		return nil, apierror.Validation(apierror.FieldViolation{Field: "redirectUris", Code: validate.InvalidValue, Message: "at most 10"})
	}
	out := make([]string, 0, len(uris))
	for _, u := range uris {
		p, err := url.Parse(u)
		if err != nil || len(u) > 2000 || !p.IsAbs() || p.Host == "" {
			return nil, apierror.Validation(apierror.FieldViolation{Field: "redirectUris", Code: validate.InvalidFormat, Message: "each must be an absolute URL"})
		}
		out = append(out, u)
	}
	return out, nil
}
