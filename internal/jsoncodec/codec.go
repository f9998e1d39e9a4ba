// Package jsoncodec is the JSON encoding of every answer: the Connect
// handlers' codec (with a reflection-free fast path for hot messages) and
// the transcoder's strict REST codec.
package jsoncodec

import (
	"errors"
	"strings"

	"connectrpc.com/vanguard"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svat/partnerapi/internal/apierror"
)

// The JSON shape of every response, over REST and Connect alike: lists are
// always present (an empty page is "contacts": []), optional fields that
// are unset are left out, never null.
var marshalJSON = protojson.MarshalOptions{EmitDefaultValues: true}

// Codec is the Connect handlers' "json" codec. It is also the codec
// the transcoder talks to the handlers with, so REST responses are these
// bytes, unchanged. Unknown fields from Connect clients are ignored (newer
// clients may send fields this server does not know yet); REST requests
// are checked strictly by restCodec before they get here.
type Codec struct{}

func (Codec) Name() string { return "json" }

func (c Codec) Marshal(v any) ([]byte, error) { return c.MarshalAppend(nil, v) }

func (Codec) MarshalAppend(b []byte, v any) ([]byte, error) {
	msg, ok := v.(proto.Message)
	if !ok {
		return nil, errors.New("json codec: not a proto.Message")
	}
	if out, ok := appendFastJSON(b, msg); ok {
		return out, nil
	}
	return marshalJSON.MarshalAppend(b, msg)
}

func (Codec) Unmarshal(b []byte, v any) error {
	msg, ok := v.(proto.Message)
	if !ok {
		return errors.New("json codec: not a proto.Message")
	}
	if len(b) == 0 {
		return nil
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, msg); err != nil {
		return errors.New(jsonProblem(err))
	}
	return nil
}

// jsonProblem says what is wrong with a JSON body in words for the
// caller: protojson's position and complaint, without its "proto:" prefix
// or Go's "unexpected EOF".
func jsonProblem(err error) string {
	msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(err.Error(), "proto:"), "\u00a0"))
	msg = strings.ReplaceAll(msg, "unexpected EOF", "the JSON ends early")
	return "malformed JSON: " + msg
}

// Strict is the transcoder's JSON codec for REST: unknown fields are
// rejected, and input that does not parse is InvalidArgument (400), not
// the transcoder's default Unknown (500).
func Strict(res vanguard.TypeResolver) vanguard.Codec {
	c := vanguard.NewJSONCodec(res)
	c.UnmarshalOptions.DiscardUnknown = false
	c.MarshalOptions = marshalJSON
	c.MarshalOptions.Resolver = res
	return restCodec{c}
}

type restCodec struct{ *vanguard.JSONCodec }

func (c restCodec) Unmarshal(data []byte, msg proto.Message) error {
	return badInput(c.JSONCodec.Unmarshal(data, msg))
}

func (c restCodec) UnmarshalField(data []byte, msg proto.Message, field protoreflect.FieldDescriptor) error {
	return badInput(c.JSONCodec.UnmarshalField(data, msg, field))
}

func badInput(err error) error {
	if err == nil {
		return nil
	}
	return apierror.ToConnect(apierror.Malformed(jsonProblem(err)))
}
