package settings

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/secret"
	"github.com/svat/partnerapi/service/admin"
)

// Cookie names. Over https the cookie is a __Host- cookie: Secure, Path=/
// and no Domain, so no other host or path can set or shadow it.
const (
	cookieName       = "partner_settings"
	secureCookieName = "__Host-partner_settings"
)

// session is a signed-in member, as of this request.
type session struct {
	tokenHash secret.Hash
	wsID      uuid.UUID
	memberID  uuid.UUID
	workspace string // opaque ids, for the admin calls
	member    string
	email     string
	csrf      string
}

// csrfToken is the CSRF token of a session: a hash of the session token
// under a label of its own, so it is unforgeable without the cookie,
// needs no storage, and reveals nothing about the cookie. It is neither
// the session token nor its stored hash.
func csrfToken(token string) string {
	sum := sha256.Sum256([]byte("partner-settings-csrf\x00" + token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func (s *session) csrfOK(presented string) bool {
	return presented != "" && subtle.ConstantTimeCompare([]byte(presented), []byte(s.csrf)) == 1
}

// secure tells whether the browser reached the page over https: the
// cookie is then Secure.
func (h *Handler) secure(r *http.Request) bool { return h.https || r.TLS != nil }

func (h *Handler) cookieName(r *http.Request) string {
	if h.secure(r) {
		return secureCookieName
	}
	return cookieName
}

func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: h.cookieName(r), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: h.secure(r), SameSite: http.SameSiteStrictMode,
	})
}

// session finds the request's live session and checks that its member is
// still approved with settings access. Otherwise it answers (signed out,
// or access withdrawn, which also ends every session of the member) and
// returns false.
func (h *Handler) session(w http.ResponseWriter, r *http.Request) (*session, bool) {
	c, err := r.Cookie(h.cookieName(r))
	if err != nil || c.Value == "" {
		h.signedOut(w, r)
		return nil, false
	}
	ctx := r.Context()
	hash := secret.HashOf(c.Value)
	now := h.cfg.Now()
	row, err := db.Q.SettingsSessionTouch(ctx, h.cfg.DB.Conn(), dbsqlc.SettingsSessionTouchParams{
		Now: now, TokenHash: hash[:], IdleAfter: now.Add(-IdleTimeout),
	})
	if errors.Is(err, db.ErrNotFound) {
		h.signedOut(w, r)
		return nil, false
	}
	if err != nil {
		h.fail(w, r, nil, "find session", fmt.Errorf("find session: %w", err))
		return nil, false
	}
	if !row.Approved || !row.SettingsAccess {
		if err := db.Q.SettingsSessionDeleteOfMember(ctx, h.cfg.DB.Conn(), dbsqlc.SettingsSessionDeleteOfMemberParams{
			WorkspaceID: row.WorkspaceID, MemberID: row.MemberID,
		}); err != nil {
			h.fail(w, r, nil, "end sessions", fmt.Errorf("end sessions of a member without access: %w", err))
			return nil, false
		}
		h.accessLost(w, r)
		return nil, false
	}
	return &session{
		tokenHash: hash, wsID: row.WorkspaceID, memberID: row.MemberID,
		workspace: opaqueid.Format(opaqueid.Workspace, row.WorkspaceID),
		member:    opaqueid.Format(opaqueid.Member, row.MemberID),
		email:     row.Email, csrf: csrfToken(c.Value),
	}, true
}

func (h *Handler) signedOut(w http.ResponseWriter, r *http.Request) {
	h.setCookie(w, r, "", -1)
	h.message(w, r, nil, http.StatusUnauthorized, "You are signed out",
		"Open the workspace settings again from your CRM: it signs you in with a new link.")
}

func (h *Handler) accessLost(w http.ResponseWriter, r *http.Request) {
	h.setCookie(w, r, "", -1)
	h.message(w, r, nil, http.StatusForbidden, "No settings access",
		"You no longer have settings access in this workspace, so you were signed out. Ask a workspace admin if you need it.")
}

// newSessionToken returns a fresh session token (256 random bits) and
// its hash, the only form stored.
func newSessionToken() (string, secret.Hash) {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand contract since Go 1.24)
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	return token, secret.HashOf(token)
}

// signIn opens a sign-in link. A browser signed in as another member is
// asked "Continue as <email>?" first (askSwitch): only that page's POST
// (continueSignIn) replaces its session, so a page elsewhere that sends
// the browser to an attacker's link cannot swap the member's session for
// the attacker's (login CSRF, issue 34, item 7). Otherwise the code is
// redeemed at once.
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	route(r, "GET "+Prefix+"/sign-in")
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	r = r.WithContext(ctx)
	code := r.URL.Query().Get("code")
	if code == "" || len(code) > 128 {
		h.badLink(w, r)
		return
	}
	if h.bounceSignIn(w, r, code) || h.askSwitch(w, r, code) {
		return
	}
	h.redeem(w, r, code)
}

// redeem redeems a sign-in link's code: one use, before it expires, for a
// member who still has settings access. It starts a new session (a
// session the browser had is ended: a new sign-in never continues an old
// session) and sends the browser to the clients page.
func (h *Handler) redeem(w http.ResponseWriter, r *http.Request, code string) {
	ctx := r.Context()
	hash := secret.HashOf(code)
	token, tokenHash := newSessionToken()
	now := h.cfg.Now()
	var signedIn, noAccess bool
	err := h.cfg.DB.WithTx(ctx, func(tx db.DBTX) error {
		row, err := db.Q.SettingsSignInCodeRedeem(ctx, tx, dbsqlc.SettingsSignInCodeRedeemParams{Now: now, CodeHash: hash[:]})
		if errors.Is(err, db.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("redeem sign-in code: %w", err)
		}
		m, err := db.Q.MemberGet(ctx, tx, dbsqlc.MemberGetParams{WorkspaceID: row.WorkspaceID, ID: row.MemberID})
		if err != nil {
			return fmt.Errorf("get member: %w", err)
		}
		if !m.Approved || !m.SettingsAccess {
			// The code stays used: it was spent on a refusal.
			noAccess = true
			return nil
		}
		if err := db.Q.SettingsSessionCreate(ctx, tx, dbsqlc.SettingsSessionCreateParams{
			TokenHash: tokenHash[:], WorkspaceID: m.WorkspaceID, MemberID: m.ID, Now: now, ExpiresAt: now.Add(SessionTTL),
		}); err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		// Ended sessions are forgotten a few at a time, here: sign-ins
		// come one by one, so this keeps pace.
		if _, err := db.Q.SettingsSessionDeleteExpired(ctx, tx, dbsqlc.SettingsSessionDeleteExpiredParams{
			Now: now, IdleBefore: now.Add(-IdleTimeout), MaxRows: 100,
		}); err != nil {
			return fmt.Errorf("delete ended sessions: %w", err)
		}
		if c, err := r.Cookie(h.cookieName(r)); err == nil && c.Value != "" {
			old := secret.HashOf(c.Value)
			if err := db.Q.SettingsSessionDelete(ctx, tx, old[:]); err != nil {
				return fmt.Errorf("end previous session: %w", err)
			}
		}
		signedIn = true
		return admin.RecordMemberAction(ctx, tx, m.WorkspaceID, m.ID, admin.ActionSettingsSignIn)
	})
	switch {
	case err != nil:
		h.fail(w, r, nil, "sign in", err)
		return
	case noAccess:
		h.accessLost(w, r)
		return
	case !signedIn:
		h.badLink(w, r)
		return
	}
	h.setCookie(w, r, token, int(SessionTTL.Seconds()))
	// A SameSite=Strict cookie is not sent on a navigation another site
	// started, redirects included: after a link from the CRM (another
	// site), the clients page is reached by a refresh of this page, a
	// navigation of the page's own site, which carries the cookie.
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		p := h.frame(nil, "Signing in", "")
		p.Refresh = "0;url=" + h.base + "/"
		p.Heading, p.Explain = "Signed in", "You are signed in to the workspace settings."
		p.Link, p.LinkText = h.base+"/", "Continue to API clients"
		h.render(w, r, http.StatusOK, "message", p)
		return
	}
	http.Redirect(w, r, h.base+"/", http.StatusSeeOther)
}

func (h *Handler) badLink(w http.ResponseWriter, r *http.Request) {
	h.message(w, r, nil, http.StatusBadRequest, "This sign-in link does not work",
		"A sign-in link works once, for a few minutes. Open the workspace settings again from your CRM to get a new one.")
}

// signOut ends the session where it is stored, and in the browser.
func (h *Handler) signOut(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	err := h.cfg.DB.WithTx(ctx, func(tx db.DBTX) error {
		if err := db.Q.SettingsSessionDelete(ctx, tx, s.tokenHash[:]); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
		return admin.RecordMemberAction(ctx, tx, s.wsID, s.memberID, admin.ActionSettingsSignOut)
	})
	if err != nil {
		h.fail(w, r, s, "sign out", err)
		return
	}
	h.setCookie(w, r, "", -1)
	http.SetCookie(w, &http.Cookie{Name: h.sentCookieName(r), Path: "/", MaxAge: -1, HttpOnly: true, Secure: h.secure(r), SameSite: http.SameSiteStrictMode})
	h.message(w, r, nil, http.StatusOK, "Signed out", "You are signed out of the workspace settings.")
}
