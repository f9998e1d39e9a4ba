package settings

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/observe/metrics"
	"github.com/svat/partnerapi/internal/records/opaqueid"
)

// Foreign ids (issue 34, item 8): a member who put another workspace's
// client id in a page's action (deactivate, rotate, revoke) reached the
// admin service, which refused the member (a 403 that read as "signed
// out") and audited the refusal in the other workspace's log, so one
// workspace could flood another's. Every route of the page that names a
// client ({id}) or a webhook endpoint ({endpoint}) now looks it up within
// the session's workspace first: an id that names nothing there, another
// workspace's or none, is a 404 ("Not found", the session untouched),
// counted in partner_settings_foreign_ids_total{kind} and in the access
// log as the route and its 404; no admin call is made, so nothing is
// written to any audit log.

// foreignID tells which id of the request's path, if any, names no
// client or endpoint of the session's workspace: "client", "webhook_endpoint"
// or "". A malformed id is left to the action, which refuses it.
func (h *Handler) foreignID(ctx context.Context, r *http.Request, s *session) (string, error) {
	raw := r.PathValue("id")
	if raw == "" {
		return "", nil
	}
	client, ok := opaqueid.Parse(opaqueid.Client, raw)
	if !ok {
		return "", nil
	}
	ws, err := db.Q.APIClientWorkspace(ctx, h.cfg.DB.Conn(), client)
	if errors.Is(err, db.ErrNotFound) || (err == nil && ws != s.wsID) {
		return "client", nil
	}
	if err != nil {
		return "", fmt.Errorf("find client: %w", err)
	}
	rawEndpoint := r.PathValue("endpoint")
	if rawEndpoint == "" {
		return "", nil
	}
	endpoint, ok := opaqueid.Parse(opaqueid.Webhook, rawEndpoint)
	if !ok {
		return "", nil
	}
	_, err = db.Q.WebhookEndpointGet(ctx, h.cfg.DB.Conn(), dbsqlc.WebhookEndpointGetParams{WorkspaceID: s.wsID, ClientID: client, ID: endpoint})
	if errors.Is(err, db.ErrNotFound) {
		return "webhook_endpoint", nil
	}
	if err != nil {
		return "", fmt.Errorf("find webhook endpoint: %w", err)
	}
	return "", nil
}

// scoped answers 404 for a request whose path names a client or an
// endpoint outside the session's workspace, and returns false then.
func (h *Handler) scoped(w http.ResponseWriter, r *http.Request, s *session) bool {
	kind, err := h.foreignID(r.Context(), r, s)
	if err != nil {
		h.fail(w, r, s, "find client", err)
		return false
	}
	switch kind {
	case "":
		return true
	case "client":
		metrics.SettingsForeignIDs.WithLabelValues(kind).Inc()
		h.message(w, r, s, http.StatusNotFound, "Not found", "There is no such API client in this workspace.")
	default:
		metrics.SettingsForeignIDs.WithLabelValues(kind).Inc()
		h.message(w, r, s, http.StatusNotFound, "Not found", "There is no such webhook endpoint.")
	}
	return false
}
