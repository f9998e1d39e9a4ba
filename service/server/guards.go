package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/contract/routes"
	"github.com/svat/partnerapi/internal/edge/gate"
	"github.com/svat/partnerapi/internal/edge/jsoncodec"
	"github.com/svat/partnerapi/internal/edge/reqbody"
	"github.com/svat/partnerapi/internal/observe/requestid"
	"github.com/svat/partnerapi/internal/records/validate"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/ratelimit"
)

// This file holds the server's defences that are not wiring: bounded
// inflation, codecs and checks that keep the caller's bytes from reaching
// a 500 or quoting internals, the admin token, and the admin address
// check (docs/security.md).

// classifier turns an error met before a handler runs (the gate's token
// lookup) into a domain error the way the error interceptor does (a
// database outage is 503, anything else an internal error with no
// detail), and logs the failures the caller cannot fix.
func classifier(log *slog.Logger) func(context.Context, error) *apierror.Error {
	return func(ctx context.Context, err error) *apierror.Error {
		var e *apierror.Error
		if !errors.As(unavailable(ctx, err), &e) {
			e = apierror.Internal(err)
		}
		if apierror.HTTPStatus(e.Code) >= 500 {
			log.ErrorContext(ctx, "request failed", "request_id", requestid.FromContext(ctx), "err", err)
		}
		return e
	}
}

// streams wraps a streaming handler (reflection) in gate.Streams.
func streams(path string, h http.Handler) (string, http.Handler) { return path, gate.Streams(h) }

// bounded makes every Connect handler refuse a message over 1 MiB, on the
// wire or once inflated (reqbody.NewGzipDecompressor stops inflating one
// byte past the bound instead of inflating a bomb to the end).
var bounded = connect.WithHandlerOptions(
	connect.WithReadMaxBytes(reqbody.MaxBytes),
	connect.WithCompression("gzip", reqbody.NewGzipDecompressor, newGzipWriter),
)

// protoCodec is connect-go's binary protobuf codec with a refusal in words
// for the caller: connect's own quotes the Go type it failed to fill.
type protoCodec struct{}

func (protoCodec) Name() string { return "proto" }

func (c protoCodec) Marshal(v any) ([]byte, error) { return c.MarshalAppend(nil, v) }

func (protoCodec) MarshalAppend(b []byte, v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, errors.New("proto codec: not a proto.Message")
	}
	return proto.MarshalOptions{}.MarshalAppend(b, m)
}

func (protoCodec) Unmarshal(b []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return errors.New("proto codec: not a proto.Message")
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return errors.New("the request is not a valid protobuf message")
	}
	return nil
}

// undecodable is the field number under which [decodeLater] keeps, in a
// request's unknown fields, why the request could not be decoded: the
// largest field number, which no message of ours uses.
const undecodable protowire.Number = protowire.MaxValidNumber

// decodeLater wraps a handler codec so that a request that does not
// decode reaches the interceptors instead of failing inside connect: a
// codec's error becomes connect's own InvalidArgument ("unmarshal
// message: …"), with no ErrorInfo and before any interceptor runs, where
// every other error of ours carries the problem code. The message is left
// empty with the reason under [undecodable], and
// [undecodableInterceptor] answers it as malformed input, after the
// credentials are checked, as REST does.
type decodeLater struct{ connect.Codec }

// MarshalAppend keeps the wrapped codec's buffer reuse.
func (c decodeLater) MarshalAppend(b []byte, v any) ([]byte, error) {
	if a, ok := c.Codec.(interface {
		MarshalAppend([]byte, any) ([]byte, error)
	}); ok {
		return a.MarshalAppend(b, v)
	}
	m, err := c.Marshal(v)
	return append(b, m...), err
}

func (c decodeLater) Unmarshal(b []byte, v any) error {
	err := c.Codec.Unmarshal(b, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	proto.Reset(m)
	// A NUL in the words (a member's name, or protojson quoting a byte of
	// the body) would end a part early.
	clean := func(s string) string { return strings.ReplaceAll(s, memberSep, "\uFFFD") }
	text := clean(err.Error())
	var me *jsoncodec.MemberError
	if errors.As(err, &me) {
		// The member as sent goes with the words, for the BadRequest detail.
		text = clean(me.Path) + memberSep + me.Code + memberSep + clean(me.Message)
	}
	why := protowire.AppendTag(nil, undecodable, protowire.BytesType)
	m.ProtoReflect().SetUnknown(protowire.AppendBytes(why, []byte(text)))
	return nil
}

// memberSep parts a [jsoncodec.MemberError]'s path, code and message
// under [undecodable]; decodeLater takes it out of each of them.
const memberSep = "\x00"

// undecodableInterceptor refuses a request [decodeLater] marked: a data
// or admin RPC as malformed_request, a token RPC as RFC 6749's
// invalid_request. A caller who sends the marker field itself gets the
// same refusal, with its own words.
func undecodableInterceptor(oauth map[string]bool) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			m, ok := req.Any().(proto.Message)
			if !ok {
				return next(ctx, req)
			}
			for b := m.ProtoReflect().GetUnknown(); len(b) > 0; {
				num, typ, n := protowire.ConsumeTag(b)
				if n < 0 {
					break
				}
				if num == undecodable && typ == protowire.BytesType {
					why, _ := protowire.ConsumeBytes(b[n:])
					msg := strings.ToValidUTF8(string(why), "?")
					path, rest, member := strings.Cut(msg, memberSep)
					code, words, _ := strings.Cut(rest, memberSep)
					if !member {
						words = msg
					}
					if oauth[req.Spec().Procedure] {
						return nil, apierror.New(apierror.CodeInvalidRequest, words)
					}
					if member {
						return nil, (&jsoncodec.MemberError{Path: path, Code: code, Message: words}).APIError()
					}
					return nil, apierror.Malformed(msg)
				}
				m := protowire.ConsumeFieldValue(num, typ, b[n:])
				if m < 0 {
					break
				}
				b = b[n+m:]
			}
			return next(ctx, req)
		}
	})
}

// cleanTextInterceptor refuses a data RPC whose request has a string
// field, at any depth, with a NUL or invalid UTF-8: PostgreSQL text holds
// neither, and its refusal would be a 500. The field is named: a filter
// of a read is a 400 like any bad filter, a field of a write a 422 like
// any invalid field.
func cleanTextInterceptor(reqs map[string]auth.Requirement, bodies map[string]string) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			need, data := reqs[req.Spec().Procedure]
			msg, ok := req.Any().(proto.Message)
			if !data || !ok {
				return next(ctx, req)
			}
			if field := validate.DirtyField(msg.ProtoReflect()); field != "" {
				// Named as the handlers name fields: relative to the REST
				// body ("email", not "contact.email").
				if body := bodies[req.Spec().Procedure]; body != "" {
					field = strings.TrimPrefix(field, body+".")
				}
				v := apierror.FieldViolation{Field: field, Code: validate.InvalidFormat, Message: validate.CleanTextMessage}
				if need.Write {
					return nil, apierror.Validation(v)
				}
				e := apierror.Malformed(field + ": " + validate.CleanTextMessage)
				e.Fields = []apierror.FieldViolation{v}
				return nil, e
			}
			return next(ctx, req)
		}
	})
}

// bodyFields maps each procedure whose REST route takes one field as the
// body (body: "contact") to that field's JSON name.
func bodyFields(table routes.Table) map[string]string {
	out := map[string]string{}
	for _, r := range table {
		if f := r.BodyField(); f != nil {
			out[r.Procedure] = f.JSONName()
		}
	}
	return out
}

// adminTokenOK reports whether an Authorization header carries the admin
// token. The SHA-256 hashes of both are compared in constant time, so
// neither the content nor the length of the token leaks through timing
// (subtle.ConstantTimeCompare returns at once on a length mismatch). With
// no token configured, any call passes.
func adminTokenOK(token, authorization string) bool {
	if token == "" {
		return true
	}
	got, _ := auth.BearerToken(authorization)
	want, have := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(want[:], have[:]) == 1
}

// requireAdminToken requires "Authorization: Bearer <token>" on every
// admin request but the health check, before any body is read. A refusal
// is logged at WARN ("admin token refused") with the route, the source
// address and why, never the header: whoever holds the admin token may
// create members and clients in any workspace, so someone trying tokens
// against the admin listener is an incident the operator must be able to
// see and trace to an address, which the access line (status 401,
// auth_failure admin_token) alone does not give.
func requireAdminToken(token string, log *slog.Logger, sources ratelimit.Sources, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		reason := ""
		switch headers := r.Header.Values("Authorization"); {
		case len(headers) > 1:
			reason = "duplicate_authorization"
		case adminTokenOK(token, r.Header.Get("Authorization")):
		case len(headers) == 0:
			reason = "missing_token"
		default:
			reason = "wrong_token"
		}
		if reason == "" {
			next.ServeHTTP(w, r)
			return
		}
		// Refused before the mux names the route: name it here for the
		// access log and metrics (never a raw path).
		info := requestid.InfoFrom(r.Context())
		info.AuthFailure = "admin_token"
		route := adminRoute(r.URL.Path)
		if route != "" {
			info.Route = route
		} else {
			route = requestid.Unmatched
		}
		if log != nil {
			log.WarnContext(r.Context(), "admin token refused", "route", route, "source", sources.Of(r),
				"peer", r.RemoteAddr, "reason", reason, "request_id", info.ID)
		}
		gate.WriteError(w, r, &apierror.Error{Code: apierror.CodeUnauthenticated,
			Message: "the admin API needs Authorization: Bearer <PARTNER_ADMIN_TOKEN>", Challenge: `Bearer realm="partner-admin"`})
	})
}

// adminRoute names a request refused before the admin mux: an admin
// procedure or /metrics as themselves, anything else "" (unmatched), so
// that unauthenticated callers cannot add label values.
func adminRoute(path string) string {
	if path == "/metrics" {
		return path
	}
	svc, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || svc != adminv1connect.AdminServiceName {
		return ""
	}
	if adminService.Methods().ByName(protoreflect.Name(method)) == nil {
		return ""
	}
	return path
}

// CheckAdminAddr refuses an admin listener address that is not loopback
// when no admin token is set: the admin API trusts its caller (it creates
// workspaces and members, and the acting member is a claim), so anyone who
// can reach it unauthenticated can mint API clients for any workspace.
func CheckAdminAddr(addr, token string) error {
	if token != "" {
		return nil
	}
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return fmt.Errorf("resolve PARTNER_ADMIN_ADDR %s: %w", addr, err)
	}
	if a.IP == nil || !a.IP.IsLoopback() {
		return fmt.Errorf("refusing to serve the admin API on %s without PARTNER_ADMIN_TOKEN: that address is not loopback, "+
			"so anyone who reaches it could create members and API clients; set PARTNER_ADMIN_TOKEN (or --admin-token), "+
			"or bind PARTNER_ADMIN_ADDR to 127.0.0.1", addr)
	}
	return nil
}

// wakeInterceptor calls wake after every write RPC of the contact and lead
// services that succeeded: its events are committed, and the webhook
// engine of this replica delivers them at once (the first attempt within a
// second of the commit), with no timer polling the feed.
func wakeInterceptor(wake func()) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, err := next(ctx, req)
			if err == nil && writesRecords(req.Spec().Procedure) {
				wake()
			}
			return res, err
		}
	})
}

// writesRecords reports whether procedure may change contacts or leads.
func writesRecords(procedure string) bool {
	service, method, _ := strings.Cut(strings.TrimPrefix(procedure, "/"), "/")
	if service != contactv1connect.ContactServiceName && service != leadv1connect.LeadServiceName {
		return false
	}
	return !strings.HasPrefix(method, "Get") && !strings.HasPrefix(method, "List")
}
