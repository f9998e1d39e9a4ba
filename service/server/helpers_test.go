package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/svat/partnerapi/service/servertest"
)

// The helpers below are servertest's, under the names the tests of this
// package were written with; new tests call servertest directly.

func decode(t *testing.T, body []byte) map[string]any { t.Helper(); return servertest.Decode(t, body) }

func mustUnmarshal(t *testing.T, b []byte, v any) { t.Helper(); servertest.MustUnmarshal(t, b, v) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func ptr[T any](v T) *T { return servertest.Ptr(v) }

func assertConnectError(t *testing.T, err error, code connect.Code, reason string) *connect.Error {
	t.Helper()
	return servertest.AssertConnectError(t, err, code, reason)
}

func errorInfo(ce *connect.Error) *errdetails.ErrorInfo { return servertest.ErrorInfo(ce) }

func badRequest(ce *connect.Error) *errdetails.BadRequest { return servertest.BadRequest(ce) }

func bearerInterceptor(tok string) connect.Interceptor { return servertest.Bearer(tok) }

func basicHeader(id, sec string) string { return servertest.BasicHeader(id, sec) }

func problemWithoutRequestID(t *testing.T, p any) map[string]any {
	t.Helper()
	return servertest.WithoutRequestID(t, p)
}

func rawQueryRow(ctx context.Context, url, sql string, dest ...any) error {
	return servertest.QueryRow(ctx, url, sql, dest...)
}
