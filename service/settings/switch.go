package settings

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/secret"
)

// Login CSRF (issue 34, item 7): a page elsewhere could send a signed-in
// member's browser to an attacker's sign-in link, and the link replaced
// the member's session with the attacker's. Now:
//
//   - A GET of a sign-in link never redeems it when the navigation came
//     from another site (Sec-Fetch-Site cross-site or same-site): the
//     SameSite=Strict session cookie is not sent then, so the page cannot
//     tell whether the browser is signed in. It answers a page that
//     reloads the same link, a navigation of the page's own site, which
//     carries the cookie if there is one (bounceSignIn).
//   - A link opened in a browser signed in as another member asks
//     "Continue as <email>?" (askSwitch): only that page's POST, guarded
//     like every form (CrossOriginProtection and the session's CSRF
//     token), replaces the session (continueSignIn).
//
// The question does not spend the link's code: it is only looked at
// (SettingsSignInCodePeek), and the POST carries the code itself and
// redeems it, once, as a GET without the question would. So the code
// keeps its rules (single use, at most 5 minutes) and no second,
// re-issued token is needed; the code sits in the question page's form,
// which is no-store and sent with no referrer, as it sat in the link.

// switchPage is the "Continue as <email>?" page.
type switchPage struct {
	page
	Code string
}

// bounceSignIn answers a sign-in link a navigation from another site
// opened with a page that opens it again from the page's own site, and
// redeems nothing. It returns false for any other request.
func (h *Handler) bounceSignIn(w http.ResponseWriter, r *http.Request, code string) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "cross-site" && site != "same-site" {
		return false
	}
	link := h.base + "/sign-in?code=" + url.QueryEscape(code)
	p := h.frame(nil, "Signing in", "")
	p.Refresh = "0;url=" + link
	p.Heading, p.Explain = "Signing in", "You are being signed in to the workspace settings."
	p.Link, p.LinkText = link, "Continue signing in"
	h.render(w, r, http.StatusOK, "message", p)
	return true
}

// current finds the browser's live session without answering anything:
// nil when there is none (or its member has lost access, which a
// sign-in settles as for a browser without a session).
func (h *Handler) current(ctx context.Context, r *http.Request) (*session, error) {
	c, err := r.Cookie(h.cookieName(r))
	if err != nil || c.Value == "" {
		return nil, nil
	}
	hash := secret.HashOf(c.Value)
	now := h.cfg.Now()
	row, err := db.Q.SettingsSessionTouch(ctx, h.cfg.DB.Conn(), dbsqlc.SettingsSessionTouchParams{
		Now: now, TokenHash: hash[:], IdleAfter: now.Add(-IdleTimeout),
	})
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find session: %w", err)
	}
	if !row.Approved || !row.SettingsAccess {
		return nil, nil
	}
	return &session{
		tokenHash: hash, wsID: row.WorkspaceID, memberID: row.MemberID,
		workspace: opaqueid.Format(opaqueid.Workspace, row.WorkspaceID),
		member:    opaqueid.Format(opaqueid.Member, row.MemberID),
		email:     row.Email, csrf: csrfToken(c.Value),
	}, nil
}

// askSwitch answers a sign-in link opened in a browser signed in as
// another member with the "Continue as <email>?" question, without
// using the code. It returns false when the link is to be redeemed at
// once: no session, or the session's own member.
func (h *Handler) askSwitch(w http.ResponseWriter, r *http.Request, code string) bool {
	ctx := r.Context()
	s, err := h.current(ctx, r)
	if err != nil {
		h.fail(w, r, nil, "sign in", err)
		return true
	}
	if s == nil {
		return false
	}
	hash := secret.HashOf(code)
	c, err := db.Q.SettingsSignInCodePeek(ctx, h.cfg.DB.Conn(), dbsqlc.SettingsSignInCodePeekParams{CodeHash: hash[:], Now: h.cfg.Now()})
	if errors.Is(err, db.ErrNotFound) {
		h.badLink(w, r)
		return true
	}
	if err != nil {
		h.fail(w, r, nil, "sign in", fmt.Errorf("find sign-in code: %w", err))
		return true
	}
	if c.WorkspaceID == s.wsID && c.MemberID == s.memberID {
		return false
	}
	p := switchPage{page: h.frame(s, "Continue as "+c.Email+"?", ""), Code: code}
	p.Heading = "Continue as " + c.Email + "?"
	p.Explain = "You are signed in as " + s.email + ". This sign-in link is for " + c.Email +
		": Continue signs you out as " + s.email + " and in as " + c.Email + "."
	h.render(w, r, http.StatusOK, "switch", p)
	return true
}

// continueSignIn is the question's "Continue": the form of the signed-in
// session (its CSRF token; CrossOriginProtection has judged the origin
// already) redeems the code and replaces the session.
func (h *Handler) continueSignIn(w http.ResponseWriter, r *http.Request) {
	route(r, "POST "+Prefix+"/sign-in")
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	r = r.WithContext(ctx)
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.message(w, r, nil, http.StatusBadRequest, "Form not read", "The form could not be read. Go back and try again.")
		return
	}
	s, err := h.current(ctx, r)
	if err != nil {
		h.fail(w, r, nil, "sign in", err)
		return
	}
	if s == nil || !s.csrfOK(r.PostForm.Get("csrf")) {
		h.message(w, r, s, http.StatusForbidden, "Form refused",
			"This form could not be verified, so it was not carried out. Open the sign-in link again.")
		return
	}
	code := r.PostForm.Get("code")
	if code == "" || len(code) > 128 {
		h.badLink(w, r)
		return
	}
	h.redeem(w, r, code)
}
