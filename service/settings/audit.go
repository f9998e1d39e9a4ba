package settings

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/service/admin"
	"github.com/svat/partnerapi/service/webhook"
)

// auditPageSize is the number of events per page of the "Audit log".
const auditPageSize = 50

// auditActions are the actions the "Action" filter offers, sorted: every
// action the service writes to the log.
var auditActions = func() []string {
	a := []string{
		admin.ActionCreate, admin.ActionList, admin.ActionRotate, admin.ActionDeactivate, admin.ActionActivate,
		admin.ActionRevoke, admin.ActionSetRates, admin.ActionRevokeTokens, admin.ActionDisableWebhooks,
		admin.ActionAuditList, admin.ActionWorkspaceCreate, admin.ActionMemberAdd, admin.ActionMemberSettingsAccess,
		admin.ActionSignInLink, admin.ActionSettingsSignIn, admin.ActionSettingsSignOut,
		admin.ActionWebhookList, admin.ActionWebhookDisable,
		webhook.ActionCreate, webhook.ActionUpdate, webhook.ActionDelete, webhook.ActionRotate, webhook.ActionReplay,
	}
	slices.Sort(a)
	return a
}()

// Values of the "Show" filter (the query's kind): the page shows the
// changes unless asked for the reads too, or alone.
const (
	showChanges = "changes"
	showReads   = "reads"
	showAll     = "all"
)

// auditFilter is the "Audit log" filter form's state: the query's
// values, echoed into the form, and the error of each, next to it.
type auditFilter struct {
	Show, Action, Actor, Client string
	Actions                     []string
	// Errors are the messages next to the fields: show, action, actor,
	// client.
	Errors map[string]string
	// General is an error that is no field's (a page link gone stale).
	General string
}

// filtered tells whether the page shows less than the default view.
func (f *auditFilter) Filtered() bool {
	return f.Show != showChanges || f.Action != "" || f.Actor != "" || f.Client != ""
}

// query is the page's address with these filters, and with key set to
// value (a link of a row: only this actor, this client); the page token
// first, then the filters.
func (f *auditFilter) query(page, key, value string) string {
	v := url.Values{}
	set := func(k, x string) {
		if k == key {
			x = value
		}
		if x != "" {
			v.Set(k, x)
		}
	}
	set("kind", f.Show)
	set("action", f.Action)
	set("actor", f.Actor)
	set("client", f.Client)
	q := v.Encode()
	if page != "" {
		q = "page=" + url.QueryEscape(page) + "&" + q
	}
	return "?" + strings.TrimSuffix(q, "&")
}

// echo bounds a query value shown again in the form.
func echo(s string) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) > 100 {
		s = string([]rune(s)[:100])
	}
	return s
}

// eventRow is an audit event as the page shows it: names beside ids, and
// links that filter the log by the row's actor or client.
type eventRow struct {
	Time, TimeISO   string
	Action          []string // the action's words, each with its separator: the name breaks between them only
	Outcome, Reason string
	// ActorType is admin.ActorMember, ActorClient or ActorOperator.
	ActorType           string
	ActorID, ActorName  string
	ActorLink           string
	Client, ClientName  string
	ClientLink          string
	Member, MemberEmail string
	// Token and Source are the token (its hash prefix) and the source
	// address of an API client's own action (a webhook endpoint's
	// create or change).
	Token, Source string
}

// actionWords splits an action at its "." and "_", keeping each with the
// word before it, so that the page may break a long name between words
// (a <wbr> between them) and never inside one.
func actionWords(a string) []string {
	var out []string
	for a != "" {
		i := strings.IndexAny(a, "._")
		if i < 0 {
			return append(out, a)
		}
		out = append(out, a[:i+1])
		a = a[i+1:]
	}
	return out
}

// audit is the "Audit log" page: newest first, paged, the changes alone
// unless the filter asks for the reads, filtered by action, actor and
// client (a GET form, so a filtered view is a link).
func (h *Handler) audit(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	f := &auditFilter{Show: echo(q.Get("kind")), Action: echo(q.Get("action")), Actor: echo(q.Get("actor")), Client: echo(q.Get("client")),
		Errors: map[string]string{}}
	if f.Show == "" {
		f.Show = showChanges
	}
	f.Actions = auditActions
	if f.Action != "" && !slices.Contains(f.Actions, f.Action) {
		f.Actions = append([]string{f.Action}, f.Actions...)
	}
	kind := f.Show
	if kind == showAll {
		kind = ""
	}
	token := q.Get("page")
	res, err := h.cfg.Admin.ListAuditEvents(r.Context(), connect.NewRequest(&adminv1.ListAuditEventsRequest{
		WorkspaceId: s.workspace, MemberId: s.member, Limit: auditPageSize, PageToken: token,
		Action: f.Action, Actor: f.Actor, ClientId: f.Client, Kind: kind,
	}))
	p := h.frame(s, "Audit log", "audit")
	p.Audit = f
	var e *apierror.Error
	if err != nil && errors.As(err, &e) && e.Code == apierror.CodeValidationFailed {
		fields := map[string]string{"kind": "show", "action": "action", "actor": "actor", "clientId": "client"}
		messages := map[string]string{
			"show":   "Choose Changes, Reads or Changes and reads.",
			"action": "Choose an action from the list.",
			"actor":  "Enter a member's id (mem_…), an API client's id (cli_…) or operator.",
			"client": "Enter an API client's id (cli_…).",
		}
		for _, v := range e.Fields {
			if field, ok := fields[v.Field]; ok {
				f.Errors[field] = messages[field]
			} else {
				f.General = "This page of the log is no longer there: start again from the newest events."
			}
		}
		h.render(w, r, http.StatusUnprocessableEntity, "audit", p)
		return
	}
	if err != nil {
		h.refused(w, r, s, "list audit events", err)
		return
	}
	if next := res.Msg.GetNextPageToken(); next != "" {
		p.Next = f.query(next, "", "")
	}
	if token != "" {
		p.Newest = f.query("", "", "")
	}
	for _, e := range res.Msg.GetEvents() {
		t := e.GetCreatedAt().AsTime()
		row := eventRow{
			Time: t.UTC().Format("2006-01-02 15:04:05 UTC"), TimeISO: t.UTC().Format(time.RFC3339),
			Action: actionWords(e.GetAction()), Outcome: e.GetOutcome(), Reason: e.GetReason(),
			ActorType: e.GetActorType(), Client: e.GetClientId(), ClientName: e.GetClientName(),
			Member: e.GetMemberId(), MemberEmail: e.GetMemberEmail(),
			Token: e.GetTokenHashPrefix(), Source: e.GetSourceAddress(),
		}
		switch row.ActorType {
		case admin.ActorMember:
			row.ActorID, row.ActorName = e.GetActorMemberId(), e.GetActorEmail()
		case admin.ActorClient:
			row.ActorID, row.ActorName = e.GetClientId(), e.GetClientName()
		}
		if row.ActorID != "" {
			row.ActorLink = f.query("", "actor", row.ActorID)
		}
		if row.Client != "" {
			row.ClientLink = f.query("", "client", row.Client)
		}
		p.Events = append(p.Events, row)
	}
	h.render(w, r, http.StatusOK, "audit", p)
}
