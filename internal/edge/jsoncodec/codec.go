// Package jsoncodec is the JSON encoding of every answer: the Connect
// handlers' codec (with a reflection-free fast path for hot messages) and
// the transcoder's strict REST codec.
package jsoncodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"connectrpc.com/vanguard"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svat/partnerapi/internal/edge/apierror"
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
	return appendJSON(b, msg, marshalJSON)
}

// appendJSON renders msg with the fast encoder, or with protojson compacted
// to the fast encoder's spacing: protojson deliberately varies its
// whitespace between builds, and answers should not.
func appendJSON(b []byte, msg proto.Message, slow protojson.MarshalOptions) ([]byte, error) {
	if out, ok := appendFastJSON(b, msg); ok {
		return out, nil
	}
	raw, err := slow.Marshal(msg)
	if err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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

// MarshalAppend writes like [Codec], so REST and Connect answers agree.
func (c restCodec) MarshalAppend(b []byte, msg proto.Message) ([]byte, error) {
	return appendJSON(b, msg, c.MarshalOptions)
}

// MarshalAppendField writes the response_body field of a route (the
// created contact or lead) with the same encoder; the embedded vanguard
// codec would call protojson directly.
func (c restCodec) MarshalAppendField(b []byte, msg proto.Message, field protoreflect.FieldDescriptor) ([]byte, error) {
	if field.Message() != nil && field.Cardinality() != protoreflect.Repeated {
		return c.MarshalAppend(b, msg.ProtoReflect().Get(field).Message().Interface())
	}
	raw, err := c.JSONCodec.MarshalAppendField(nil, msg, field)
	if err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

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

// AppendREST appends the JSON of a REST answer, as the transcoder's codec
// writes it.
func AppendREST(b []byte, msg proto.Message) ([]byte, error) {
	return appendJSON(b, msg, marshalJSON)
}

// AppendRESTField appends the JSON of the field of msg that a route
// answers as its body (response_body), as the transcoder's codec writes
// it.
func AppendRESTField(b []byte, msg proto.Message, field protoreflect.FieldDescriptor) ([]byte, error) {
	if field.Message() != nil && !field.IsList() && !msg.ProtoReflect().Has(field) {
		// An unset message renders as protojson renders it.
		return append(b, "{}"...), nil
	}
	return restCodec{&vanguard.JSONCodec{MarshalOptions: marshalJSON}}.MarshalAppendField(b, msg, field)
}

// UnmarshalStrict reads a REST body into msg as the transcoder's codec
// does: unknown fields are refused, and any problem is a 400 in words.
func UnmarshalStrict(data []byte, msg proto.Message) *apierror.Error {
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, msg); err != nil {
		return apierror.Malformed(jsonProblem(err))
	}
	return nil
}
