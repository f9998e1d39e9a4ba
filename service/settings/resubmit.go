package settings

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
)

// A form whose answer shows a secret ("Create API client", "Rotate
// secret") must not act twice: a reload of the page that showed the
// secret, or Back and a resubmission, would send the same form again,
// create a second client or rotate again (ending the secret just shown),
// and show another secret. Each such form carries a random form id; the
// answer that shows the secret also records the id in a cookie of spent
// form ids, and a form whose id is spent is answered with a page that
// says so and shows no secret. The cookie guards the browser against
// its own repetition, not against an attacker (who could simply load a
// new form). Two sends of one form at once (a double click) both carry
// the cookie from before either answer; for them the session's row keeps
// the form id it last sent (formOnce), and of the two one acts.
const (
	sentCookieName       = "partner_settings_sent"
	secureSentCookieName = "__Host-partner_settings_sent"
	// maxSentForms is how many spent form ids the cookie keeps: the
	// latest, enough for a few Back steps through secret pages.
	maxSentForms = 8
	// formIDLen is the length of a form id: 16 random bytes, base64url.
	formIDLen = 22
)

// newFormID returns a fresh form id.
func newFormID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand contract since Go 1.24)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// validFormID tells whether id has the form of a form id (it goes into
// a cookie, so nothing else may).
func validFormID(id string) bool {
	if len(id) != formIDLen {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil
}

func (h *Handler) sentCookieName(r *http.Request) string {
	if h.secure(r) {
		return secureSentCookieName
	}
	return sentCookieName
}

// sentForms is the spent form ids the browser sent, oldest first.
func (h *Handler) sentForms(r *http.Request) []string {
	c, err := r.Cookie(h.sentCookieName(r))
	if err != nil {
		return nil
	}
	var ids []string
	for id := range strings.SplitSeq(c.Value, ".") {
		if validFormID(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// spent tells whether the form id was already used by this browser.
func (h *Handler) spent(r *http.Request, id string) bool {
	return slices.Contains(h.sentForms(r), id)
}

// markSpent records the form id in the browser, before the answer that
// shows the secret is written.
func (h *Handler) markSpent(w http.ResponseWriter, r *http.Request, id string) {
	ids := append(h.sentForms(r), id)
	if len(ids) > maxSentForms {
		ids = ids[len(ids)-maxSentForms:]
	}
	http.SetCookie(w, &http.Cookie{
		Name: h.sentCookieName(r), Value: strings.Join(ids, "."), Path: "/", MaxAge: int(SessionTTL.Seconds()),
		HttpOnly: true, Secure: h.secure(r), SameSite: http.SameSiteStrictMode,
	})
}

// formOnce checks the form id of a form that shows a secret and records
// it as sent: formFresh, then spendForm.
func (h *Handler) formOnce(w http.ResponseWriter, r *http.Request, s *session, id string) bool {
	return h.formFresh(w, r, s, id) && h.spendForm(w, r, s, id)
}

// formFresh answers (and returns false) when the form id is missing or
// malformed (a form of an older page, 400) or spent in this browser (a
// repeated form, 409, no secret).
func (h *Handler) formFresh(w http.ResponseWriter, r *http.Request, s *session, id string) bool {
	if !validFormID(id) {
		h.message(w, r, s, http.StatusBadRequest, "Form not read", "The form could not be read. Reload the page and try again.")
		return false
	}
	if h.spent(r, id) {
		h.alreadyDone(w, r, s)
		return false
	}
	return true
}

// spendForm records the form id in the session's row: of two sends at
// once, which both passed the cookie, one goes on, the other is answered
// 409 (migration 00118).
func (h *Handler) spendForm(w http.ResponseWriter, r *http.Request, s *session, id string) bool {
	n, err := db.Q.SettingsSessionSpendForm(r.Context(), h.cfg.DB.Conn(), dbsqlc.SettingsSessionSpendFormParams{FormID: id, TokenHash: s.tokenHash[:]})
	if err != nil {
		h.fail(w, r, s, "record form", fmt.Errorf("record form: %w", err))
		return false
	}
	if n == 0 {
		h.alreadyDone(w, r, s)
		return false
	}
	return true
}

func (h *Handler) alreadyDone(w http.ResponseWriter, r *http.Request, s *session) {
	h.message(w, r, s, http.StatusConflict, "Already done",
		"This form was already sent, and the client secret it made was shown then, once. It is not shown again: if it was not copied, rotate the secret.")
}

// formAgain takes back the form id spendForm recorded, for a send that was
// refused for its fields and changed nothing, so that the corrected form
// acts. A failure leaves the id spent: the member reloads the form.
func (h *Handler) formAgain(r *http.Request, s *session, id string) {
	if err := db.Q.SettingsSessionUnspendForm(r.Context(), h.cfg.DB.Conn(), dbsqlc.SettingsSessionUnspendFormParams{TokenHash: s.tokenHash[:], FormID: id}); err != nil {
		h.cfg.Log.WarnContext(r.Context(), "take back a form id", "err", err)
	}
}
