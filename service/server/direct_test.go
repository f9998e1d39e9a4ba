package server_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/contract/routes"
	"github.com/svat/partnerapi/service"
	"github.com/svat/partnerapi/service/servertest"
)

// TestEveryRESTRouteIsServed: every google.api.http route of the public
// and the admin services reaches its RPC through the one REST gateway
// (restgw.New refuses to start without a call for one; this checks the
// wiring answers each, custom verbs included): none is the gateway's 404
// or 405.
func TestEveryRESTRouteIsServed(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	variable := regexp.MustCompile(`\{[^}]*\}`)
	for _, listener := range []struct {
		base  string
		table routes.Table
	}{
		{h.Public.URL, routes.Of(service.PublicServices...)},
		{h.Admin.URL, routes.Of(adminv1.File_partner_admin_v1_admin_proto.Services().Get(0))},
	} {
		if len(listener.table) == 0 {
			t.Fatalf("no routes for %s", listener.base)
		}
		for _, r := range listener.table {
			path := variable.ReplaceAllString(r.Template, "x")
			body := io.Reader(nil)
			if r.Method != http.MethodGet {
				body = strings.NewReader("{}")
			}
			req, _ := http.NewRequest(r.Method, listener.base+path, body)
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			if r.OAuth() {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusNotFound && strings.Contains(string(b), "no such endpoint") || res.StatusCode == http.StatusMethodNotAllowed {
				t.Errorf("%s %s (%s): %d %s", r.Method, path, r.Procedure, res.StatusCode, b)
			}
		}
	}
}
