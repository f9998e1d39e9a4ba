package settings

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/security/scope"
	"github.com/svat/partnerapi/service/admin"
)

// clientRow is an API client as the page shows it.
type clientRow struct {
	ID, Name            string
	Scopes              []string
	Status              string
	Rates               string
	Created, CreatedISO string
	Rotated, LastUsed   string
}

func toRow(c *adminv1.ApiClient) clientRow {
	r := clientRow{ID: c.GetClientId(), Name: c.GetName(), Scopes: c.GetScopes(), Status: c.GetStatus(), Rates: rates(c)}
	created := c.GetCreatedAt().AsTime()
	r.Created, r.CreatedISO = when(created), created.UTC().Format(time.RFC3339)
	if c.GetSecretRotatedAt() != nil {
		r.Rotated = when(c.GetSecretRotatedAt().AsTime())
	}
	if c.GetLastUsedAt() != nil {
		r.LastUsed = when(c.GetLastUsedAt().AsTime())
	}
	return r
}

func when(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

func rates(c *adminv1.ApiClient) string {
	one := func(v *int32) string {
		if v == nil {
			return "default"
		}
		return strconv.Itoa(int(*v)) + "/s"
	}
	return "read " + one(c.ReadRate) + ", write " + one(c.WriteRate)
}

// notices are the outcomes a redirect after a change names (?done=…):
// fixed texts, never the request's.
var notices = map[string]string{
	"deactivated": "The client is deactivated: it cannot get or use tokens until it is activated again.",
	"activated":   "The client is active again.",
	"revoked":     "The client is revoked, for good, and every token of it has ended.",
	"disabled":    "The webhook endpoint is disabled.",
	"enabled":     "The webhook endpoint is enabled again: it resumes from its oldest event not delivered with success.",
}

// refused answers an error of an admin call: a refusal of the member
// (access withdrawn since the session was checked) signs them out, a
// missing client is a 404, a final state a 409, anything else a failure.
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, s *session, what string, err error) {
	var e *apierror.Error
	if !errors.As(err, &e) {
		h.fail(w, r, s, what, err)
		return
	}
	switch e.Code {
	case apierror.CodePermissionDenied:
		h.accessLost(w, r)
	case apierror.CodeNotFound:
		h.message(w, r, s, http.StatusNotFound, "Not found", "There is no such API client in this workspace.")
	case apierror.CodeFailedPrecondition:
		h.message(w, r, s, http.StatusConflict, "Not possible", e.Message+".")
	case apierror.CodeValidationFailed:
		h.message(w, r, s, http.StatusBadRequest, "Not possible", e.Message)
	default:
		h.fail(w, r, s, what, err)
	}
}

// clients is the clients page.
func (h *Handler) clients(w http.ResponseWriter, r *http.Request, s *session) {
	res, err := h.cfg.Admin.ListApiClients(r.Context(), connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: s.workspace, MemberId: s.member}))
	if err != nil {
		h.refused(w, r, s, "list clients", err)
		return
	}
	p := h.frame(s, "API clients", "clients")
	p.Notice = notices[r.URL.Query().Get("done")]
	for _, c := range res.Msg.GetClients() {
		p.Clients = append(p.Clients, toRow(c))
	}
	h.render(w, r, http.StatusOK, "clients", p)
}

// findClient reads one client of the member's workspace, through the
// same audited list the clients page uses (there is no call for one).
func (h *Handler) findClient(ctx context.Context, s *session, id string) (*adminv1.ApiClient, error) {
	res, err := h.cfg.Admin.ListApiClients(ctx, connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: s.workspace, MemberId: s.member}))
	if err != nil {
		return nil, err
	}
	for _, c := range res.Msg.GetClients() {
		if c.GetClientId() == id {
			return c, nil
		}
	}
	return nil, apierror.New(apierror.CodeNotFound, "api client not found")
}

// client is one client's page: its details, its actions and its webhook
// endpoints.
func (h *Handler) client(w http.ResponseWriter, r *http.Request, s *session) {
	c, err := h.findClient(r.Context(), s, r.PathValue("id"))
	if err != nil {
		h.refused(w, r, s, "get client", err)
		return
	}
	row := toRow(c)
	p := h.frame(s, c.GetName(), "clients")
	p.Client = &row
	p.Notice = notices[r.URL.Query().Get("done")]
	if h.cfg.Webhooks != nil {
		p.Webhooks = true
		if !h.listEndpoints(w, r, s, &p, row.ID) {
			return
		}
	}
	h.render(w, r, http.StatusOK, "client", p)
}

// createForm is the "Create API client" form's state.
type createForm struct {
	// FormID makes the form act once (see resubmit.go).
	FormID              string
	Name                string
	Scopes              []scopeBox
	ReadRate, WriteRate string
	// Errors are the messages next to the fields, by the admin API's
	// field name (name, scopes, readRate, writeRate).
	Errors  map[string]string
	General string
}

type scopeBox struct {
	Name    string
	Checked bool
}

// newForm lists every scope the server knows, so that a new scope gets
// its checkbox without a change here.
func newForm(checked []string) *createForm {
	f := &createForm{Errors: map[string]string{}}
	for _, n := range scope.Names() {
		box := scopeBox{Name: n}
		for _, c := range checked {
			box.Checked = box.Checked || c == n
		}
		f.Scopes = append(f.Scopes, box)
	}
	return f
}

func (h *Handler) createForm(w http.ResponseWriter, r *http.Request, s *session) {
	f := newForm(nil)
	f.FormID = newFormID()
	h.renderForm(w, r, s, http.StatusOK, f)
}

func (h *Handler) renderForm(w http.ResponseWriter, r *http.Request, s *session, status int, f *createForm) {
	p := h.frame(s, "Create API client", "clients")
	p.Form, p.MaxRate = f, admin.MaxRate
	h.render(w, r, status, "create", p)
}

// create creates a client and shows its secret, once: in the answer to
// the POST, never behind a URL. The same form sent again (a reload of
// the answer) creates nothing and shows no secret.
func (h *Handler) create(w http.ResponseWriter, r *http.Request, s *session) {
	form := r.PostForm
	if !h.formFresh(w, r, s, form.Get("form_id")) {
		return
	}
	f := newForm(form["scope"])
	f.FormID = form.Get("form_id")
	f.Name, f.ReadRate, f.WriteRate = form.Get("name"), strings.TrimSpace(form.Get("read_rate")), strings.TrimSpace(form.Get("write_rate"))
	req := &adminv1.CreateApiClientRequest{WorkspaceId: s.workspace, MemberId: s.member, Name: f.Name, Scopes: form["scope"]}
	readRate, ok1 := rate(f.ReadRate)
	writeRate, ok2 := rate(f.WriteRate)
	if !ok1 {
		f.Errors["readRate"] = fmt.Sprintf("Enter a whole number of requests per second from 1 to %d, or leave it empty.", admin.MaxRate)
	}
	if !ok2 {
		f.Errors["writeRate"] = fmt.Sprintf("Enter a whole number of requests per second from 1 to %d, or leave it empty.", admin.MaxRate)
	}
	// Every field is checked before the form is answered, so that each
	// error shows at once, next to its field (not one per try). The rates
	// were read above: the check sees the other fields.
	var e *apierror.Error
	if err := admin.CheckCreateApiClient(&adminv1.CreateApiClientRequest{Name: f.Name, Scopes: form["scope"]}); errors.As(err, &e) {
		for _, v := range e.Fields {
			f.Errors[v.Field] = fieldMessage(v)
		}
	}
	if len(f.Errors) > 0 {
		h.renderForm(w, r, s, http.StatusUnprocessableEntity, f)
		return
	}
	if !h.spendForm(w, r, s, f.FormID) {
		return
	}
	req.ReadRate, req.WriteRate = readRate, writeRate
	res, err := h.cfg.Admin.CreateApiClient(r.Context(), connect.NewRequest(req))
	if err != nil && errors.As(err, &e) && e.Code == apierror.CodeValidationFailed {
		h.formAgain(r, s, f.FormID)
		for _, v := range e.Fields {
			f.Errors[v.Field] = fieldMessage(v)
		}
		if len(f.Errors) == 0 {
			f.General = e.Message
		}
		h.renderForm(w, r, s, http.StatusUnprocessableEntity, f)
		return
	}
	if err != nil {
		h.refused(w, r, s, "create client", err)
		return
	}
	h.markSpent(w, r, f.FormID)
	h.showSecret(w, r, s, "API client created", res.Msg.GetClient(), res.Msg.GetClientSecret())
}

// rate reads an optional rate field: empty is the server default.
func rate(s string) (*int32, bool) {
	if s == "" {
		return nil, true
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 || n > admin.MaxRate {
		return nil, false
	}
	v := int32(n)
	return &v, true
}

// fieldMessage says a field's problem as a sentence about the field the
// member sees.
func fieldMessage(v apierror.FieldViolation) string {
	label := map[string]string{"name": "The name", "scopes": "Scopes", "readRate": "The read rate", "writeRate": "The write rate"}[v.Field]
	if label == "" {
		return v.Message
	}
	msg := v.Message
	if v.Field == "scopes" && v.Code == "required" {
		return "Choose at least one scope."
	}
	return label + " " + msg + "."
}

// showSecret renders a secret once. The answer is not stored (no-store,
// set for every page), the secret is in no URL, and no later page has it.
func (h *Handler) showSecret(w http.ResponseWriter, r *http.Request, s *session, heading string, c *adminv1.ApiClient, secret string) {
	row := toRow(c)
	p := h.frame(s, heading, "clients")
	p.Heading, p.Client, p.Secret, p.Script = heading, &row, secret, true
	h.render(w, r, http.StatusOK, "secret", p)
}

// disableWebhooksField is the confirmations' "Disable its webhook
// endpoints" checkbox: the admin calls' disable_webhooks.
const disableWebhooksField = "disable_webhooks"

// webhookChoice is what a confirmation says of the client's webhook
// endpoints: the hint beside the "Disable its webhook endpoints"
// checkbox, and whether the choice is made already (Revoke disables them
// whatever is chosen, so its box is checked and cannot be cleared).
type webhookChoice struct {
	hint   string
	locked bool
}

// confirm asks before a change of a client; once says that the change
// shows a secret, so that its form acts once. With a webhook choice, and
// a server that has webhooks, it lists the client's endpoints (URL and
// status) above a "Disable its webhook endpoints" checkbox, checked: a
// secret that leaked may have made one of them, and it keeps receiving
// unless it is disabled.
func (h *Handler) confirm(w http.ResponseWriter, r *http.Request, s *session, action, heading, explain, button, class string, once bool, hooks *webhookChoice) {
	c, err := h.findClient(r.Context(), s, r.PathValue("id"))
	if err != nil {
		h.refused(w, r, s, "get client", err)
		return
	}
	if c.GetStatus() == admin.StatusRevoked {
		h.message(w, r, s, http.StatusConflict, "Not possible", "The client is revoked; revocation is final.")
		return
	}
	row := toRow(c)
	p := h.frame(s, heading, "clients")
	p.Client, p.Heading, p.Explain = &row, fmt.Sprintf(heading, c.GetName()), explain
	p.Title = p.Heading
	p.Action, p.Button, p.ButtonClass = h.base+"/clients/"+row.ID+"/"+action, button, class
	if once {
		p.FormID = newFormID()
	}
	if hooks != nil && h.cfg.Webhooks != nil {
		p.Webhooks, p.DisableHint, p.DisableLocked = true, hooks.hint, hooks.locked
		if !h.listEndpoints(w, r, s, &p, row.ID) {
			return
		}
	}
	h.render(w, r, http.StatusOK, "confirm", p)
}

// listEndpoints puts the client's webhook endpoints on the page, or the
// reason they are not there; false: the member lost access, and was told.
func (h *Handler) listEndpoints(w http.ResponseWriter, r *http.Request, s *session, p *page, client string) bool {
	var err error
	p.Endpoints, err = h.cfg.Webhooks.ListEndpoints(r.Context(), s.workspace, s.member, client)
	if err != nil {
		var e *apierror.Error
		if errors.As(err, &e) && e.Code == apierror.CodePermissionDenied {
			h.accessLost(w, r)
			return false
		}
		h.cfg.Log.ErrorContext(r.Context(), "list webhook endpoints", "err", err)
		p.WebhooksError = "The webhook endpoints could not be listed. Reload the page to try again."
	}
	return true
}

func (h *Handler) confirmRotate(w http.ResponseWriter, r *http.Request, s *session) {
	h.confirm(w, r, s, "rotate", "Rotate the secret of %s?",
		"A new secret replaces the current one, which stops working at once, and every token of the client ends. The new secret is shown once.",
		"Rotate secret", "primary", true, &webhookChoice{
			hint: "Whoever held the old secret may have made a webhook endpoint that receives your workspace's data; a new secret does not stop it. " +
				"A disabled endpoint cannot be enabled again by the client: it makes a new one, and a replay sends it what it missed.",
		})
}

func (h *Handler) confirmRevoke(w http.ResponseWriter, r *http.Request, s *session) {
	h.confirm(w, r, s, "revoke", "Revoke %s?",
		"Revoking is final: the client and every token of it stop working for good, and it cannot be activated again.",
		"Revoke", "danger", false, &webhookChoice{
			hint:   "Revoking disables every webhook endpoint of the client for good.",
			locked: true,
		})
}

// disableWebhooks reads a confirmation's "Disable its webhook endpoints"
// checkbox: sent only when checked.
func disableWebhooks(r *http.Request) bool { return r.PostForm.Get(disableWebhooksField) == "on" }

// rotate rotates the secret and shows the new one, once; the same form
// sent again rotates nothing (the secret just shown keeps working). With
// "Disable its webhook endpoints" checked, the same transaction disables
// every endpoint of the client (credentials_revoked).
func (h *Handler) rotate(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PostForm.Get("form_id")
	if !h.formOnce(w, r, s, id) {
		return
	}
	res, err := h.cfg.Admin.RotateApiClientSecret(r.Context(), connect.NewRequest(&adminv1.RotateApiClientSecretRequest{
		ClientId: r.PathValue("id"), MemberId: s.member, DisableWebhooks: disableWebhooks(r)}))
	if err != nil {
		h.refused(w, r, s, "rotate secret", err)
		return
	}
	h.markSpent(w, r, id)
	h.showSecret(w, r, s, "Secret rotated", res.Msg.GetClient(), res.Msg.GetClientSecret())
}

// done redirects after a change (POST-redirect-GET).
func (h *Handler) done(w http.ResponseWriter, r *http.Request, path, notice string) {
	http.Redirect(w, r, h.base+path+"?done="+notice, http.StatusSeeOther)
}

func (h *Handler) deactivate(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if _, err := h.cfg.Admin.DeactivateApiClient(r.Context(), connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: id, MemberId: s.member})); err != nil {
		h.refused(w, r, s, "deactivate client", err)
		return
	}
	h.done(w, r, "/clients/"+id, "deactivated")
}

func (h *Handler) activate(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if _, err := h.cfg.Admin.ActivateApiClient(r.Context(), connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: id, MemberId: s.member})); err != nil {
		h.refused(w, r, s, "activate client", err)
		return
	}
	h.done(w, r, "/clients/"+id, "activated")
}

func (h *Handler) revoke(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if _, err := h.cfg.Admin.RevokeApiClient(r.Context(), connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: id, MemberId: s.member,
		DisableWebhooks: disableWebhooks(r)})); err != nil {
		h.refused(w, r, s, "revoke client", err)
		return
	}
	h.done(w, r, "/clients/"+id, "revoked")
}

// confirmDisableEndpoint asks before "Disable" acts: the endpoint stops
// receiving at once, and only a member or an operator can enable it
// again (the client cannot).
func (h *Handler) confirmDisableEndpoint(w http.ResponseWriter, r *http.Request, s *session) {
	ep, ok := h.findEndpoint(w, r, s)
	if !ok {
		return
	}
	if ep.Disabled {
		h.message(w, r, s, http.StatusConflict, "Not possible", "The webhook endpoint is disabled already.")
		return
	}
	h.confirm(w, r, s, "webhooks/"+ep.ID+"/disable", "Disable a webhook endpoint of %s?",
		"Events stop going to "+ep.URL+" at once. The client cannot enable it again; you can, with Enable on this page, "+
			"and it then resumes from its oldest event not delivered with success.",
		"Disable", "danger", false, nil)
}

// findEndpoint finds the endpoint the path names among the client's; an
// id that is not one of them is a 404, told.
func (h *Handler) findEndpoint(w http.ResponseWriter, r *http.Request, s *session) (WebhookEndpoint, bool) {
	if h.cfg.Webhooks == nil {
		h.message(w, r, s, http.StatusNotFound, "Not found", "There is no such webhook endpoint.")
		return WebhookEndpoint{}, false
	}
	eps, err := h.cfg.Webhooks.ListEndpoints(r.Context(), s.workspace, s.member, r.PathValue("id"))
	if err != nil {
		h.refused(w, r, s, "list webhook endpoints", err)
		return WebhookEndpoint{}, false
	}
	for _, ep := range eps {
		if ep.ID == r.PathValue("endpoint") {
			return ep, true
		}
	}
	h.message(w, r, s, http.StatusNotFound, "Not found", "There is no such webhook endpoint.")
	return WebhookEndpoint{}, false
}

// enableEndpoint enables again an endpoint an administrator or the
// delivery engine disabled (admin.CanEnableWebhook); the admin service
// refuses the others (409).
func (h *Handler) enableEndpoint(w http.ResponseWriter, r *http.Request, s *session) {
	if h.cfg.Webhooks == nil {
		h.message(w, r, s, http.StatusNotFound, "Not found", "There is no such webhook endpoint.")
		return
	}
	id := r.PathValue("id")
	if err := h.cfg.Webhooks.EnableEndpoint(r.Context(), s.workspace, s.member, id, r.PathValue("endpoint")); err != nil {
		h.refused(w, r, s, "enable webhook endpoint", err)
		return
	}
	h.done(w, r, "/clients/"+id, "enabled")
}

func (h *Handler) disableEndpoint(w http.ResponseWriter, r *http.Request, s *session) {
	if h.cfg.Webhooks == nil {
		h.message(w, r, s, http.StatusNotFound, "Not found", "There is no such webhook endpoint.")
		return
	}
	id := r.PathValue("id")
	if err := h.cfg.Webhooks.DisableEndpoint(r.Context(), s.workspace, s.member, id, r.PathValue("endpoint")); err != nil {
		h.refused(w, r, s, "disable webhook endpoint", err)
		return
	}
	h.done(w, r, "/clients/"+id, "disabled")
}
