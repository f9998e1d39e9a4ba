package server_test

import (
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"golang.org/x/oauth2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

type oauth2AuthStyle = oauth2.AuthStyle

const (
	authStyleInHeader = oauth2.AuthStyleInHeader
	authStyleInParams = oauth2.AuthStyleInParams
)

// assertConnectError checks the code, the reason in ErrorInfo and that the
// reason leads the message.
func assertConnectError(t *testing.T, err error, code connect.Code, reason string) *connect.Error {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v, want a Connect error %v", err, code)
	}
	if ce.Code() != code {
		t.Fatalf("code = %v, want %v (%v)", ce.Code(), code, ce)
	}
	if !strings.HasPrefix(ce.Message(), reason+": ") {
		t.Errorf("message = %q, want it to start with %q", ce.Message(), reason)
	}
	found := false
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if info, ok := v.(*errdetails.ErrorInfo); ok {
			found = true
			if info.GetReason() != reason {
				t.Errorf("ErrorInfo.reason = %q, want %q", info.GetReason(), reason)
			}
		}
	}
	if !found {
		t.Errorf("no ErrorInfo detail in %v", ce)
	}
	return ce
}

// newAdminClient talks to the harness's admin listener without any token.
func newAdminClient(h *servertest.Harness) adminv1connect.AdminServiceClient {
	return adminv1connect.NewAdminServiceClient(h.Admin.Client(), h.Admin.URL)
}
