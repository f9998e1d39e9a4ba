package settings_test

import (
	"strings"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// TestContinueAsInBrowser: in chromium, a member signed in as A who opens
// member B's sign-in link gets "Continue as <B>?" (axe-clean, a
// "Continue" button and a "Cancel" link); Cancel keeps A; Continue on a
// fresh link signs in as B (issue 34, item 7).
func TestContinueAsInBrowser(t *testing.T) {
	ctx := newBrowserTab(t)
	axe := axeSource(t)
	h := servertest.New(t)
	_, memberA := h.Workspace("Continue A")
	_, memberB := h.Workspace("Continue B")
	b := tab{t: t, ctx: ctx}
	who := func() string {
		return evalIn[string](b, `document.querySelector("header p").textContent`)
	}

	b.open(signInLink(t, h, memberA, 0))
	b.waitHeading("API clients")
	asA := who()

	link := signInLink(t, h, memberB, 0)
	b.open(link)
	b.waitFor("the question", `(document.querySelector("h1") || {textContent: ""}).textContent.startsWith("Continue as ")`)
	heading := evalIn[string](b, `document.querySelector("h1").textContent`)
	b.find("button", "Continue")
	b.find("link", "Cancel")
	b.axe(axe, "the Continue as question")
	if who() != asA {
		t.Fatalf("the question's header says %q, want %q", who(), asA)
	}
	b.click("link", "Cancel")
	b.waitHeading("API clients")
	if who() != asA {
		t.Fatalf("after Cancel: %q, want %q", who(), asA)
	}

	// The question spent nothing: the same link asks again, and Continue
	// signs in as B.
	b.open(link)
	b.waitHeading(heading)
	b.click("button", "Continue")
	b.waitHeading("API clients")
	emailB := strings.TrimSuffix(strings.TrimPrefix(heading, "Continue as "), "?")
	if got := who(); !strings.Contains(got, "signed in as "+emailB) {
		t.Fatalf("after Continue: %q, want signed in as %s", got, emailB)
	}
}
