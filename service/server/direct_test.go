package server_test

import (
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// TestEveryRESTRouteIsServedInProcess: no public REST route goes through
// the transcoder (restgw.Direct); a new RPC must be added to directCalls.
func TestEveryRESTRouteIsServedInProcess(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	if routes := h.Server.REST.Transcoded(); len(routes) > 0 {
		t.Fatalf("routes served by the transcoder: %v", routes)
	}
}
