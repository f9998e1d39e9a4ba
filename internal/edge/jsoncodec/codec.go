// Package jsoncodec is the JSON encoding of every answer: the Connect
// handlers' codec (with a reflection-free fast path for hot messages),
// which the REST gateway writes its answers with too, and the strict
// reading of REST bodies.
package jsoncodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svat/partnerapi/internal/contract/apierror"
)

// The JSON shape of every response, over REST and Connect alike: lists are
// always present (an empty page is "contacts": []), optional fields that
// are unset are left out, never null.
var marshalJSON = protojson.MarshalOptions{EmitDefaultValues: true}

// Codec is the Connect handlers' "json" codec. The REST gateway writes
// its answers with the same encoder ([AppendREST]), so a REST answer and
// a Connect one are the same bytes. Requests are read strictly over
// Connect JSON as over REST ([UnmarshalStrict]): a member the message has
// not is a 400 naming it, not silently dropped (a REST-shaped body sent to
// an RPC would otherwise lose every member). Binary protobuf keeps
// proto's own rule: unknown fields are kept, unread.
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
	if err := decode(b, msg); err != nil {
		return err
	}
	return nil
}

// decode reads a JSON body as the contract says, over REST and Connect
// alike: a member the message has not, a field under its proto name, or a
// value of the wrong type is a [MemberError]; any other problem (JSON
// that does not parse) is an error in words.
func decode(b []byte, msg proto.Message) error {
	md := msg.ProtoReflect().Descriptor()
	if decodeValues(b, msg) {
		// It refuses proto names itself: none was sent.
		return nil
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(b, msg); err != nil {
		if e := checkMembers(b, md, ""); e != nil {
			return e
		}
		if typeProblem(err) && json.Valid(b) {
			if e := wrongValue(b, msg.ProtoReflect().New(), ""); e != nil {
				proto.Reset(msg)
				return e
			}
		}
		return errors.New(jsonProblem(err))
	}
	if mentionsProtoName(b, md) {
		if e := checkMembers(b, md, ""); e != nil {
			proto.Reset(msg)
			return e
		}
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

// AppendREST appends the JSON of a REST answer.
func AppendREST(b []byte, msg proto.Message) ([]byte, error) {
	return appendJSON(b, msg, marshalJSON)
}

// AppendRESTField appends the JSON of the field of msg that a route
// answers as its body (response_body).
func AppendRESTField(b []byte, msg proto.Message, field protoreflect.FieldDescriptor) ([]byte, error) {
	m := msg.ProtoReflect()
	if field.Message() != nil && !field.IsList() && !field.IsMap() {
		if !m.Has(field) {
			// An unset message renders as protojson renders it.
			return append(b, "{}"...), nil
		}
		return appendJSON(b, m.Get(field).Message().Interface(), marshalJSON)
	}
	// A list, a map or a scalar: the member of the whole message's JSON.
	only := m.New()
	if m.Has(field) {
		only.Set(field, m.Get(field))
	}
	raw, err := marshalJSON.Marshal(only.Interface())
	if err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, members[field.JSONName()]); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// UnmarshalStrict reads a REST body into msg: unknown fields are refused,
// and any problem is a 400 in words.
func UnmarshalStrict(data []byte, msg proto.Message) *apierror.Error {
	err := decode(data, msg)
	var me *MemberError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &me):
		return me.APIError()
	default:
		return apierror.Malformed(err.Error())
	}
}
