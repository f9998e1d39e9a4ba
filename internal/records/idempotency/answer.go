package idempotency

import (
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
)

// A batch's answer is stored as protobuf under its key (InTx). protobuf
// encodes a map by reflection, allocating every key twice (size, then
// bytes): for a hundred leads of ten custom values each, that was a
// sixth of the server's work on the values (make bench, line (f10)).
// encodeAnswer writes a lead batch's answer with the values encoded here
// instead. What it writes is protobuf, read back by proto.Unmarshal as
// the same message (TestEncodeAnswerReadsBackTheAnswer), so any release
// replays it: each result is the result without its lead's values, then
// the lead again holding only the values, which protobuf merges into the
// first (a message field met twice on the wire is merged).

// Field numbers the encoding writes, read from the descriptors.
var (
	resultsField = fieldNumber(&leadv1.BatchCreateLeadsResponse{}, "results")
	leadField    = fieldNumber(&leadv1.BatchCreateLeadsResult{}, "lead")
	valuesField  = fieldNumber(&leadv1.Lead{}, "custom_fields")
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// google.protobuf.Value's fields, and ListValue's one.
const (
	nullField   protowire.Number = 1
	numberField protowire.Number = 2
	stringField protowire.Number = 3
	boolField   protowire.Number = 4
	listField   protowire.Number = 6
	itemsField  protowire.Number = 1
)

// encodeAnswer is resp as stored: proto.Marshal's message, written as
// above for a lead batch's answer.
func encodeAnswer(resp proto.Message) ([]byte, error) {
	if r, ok := resp.(*leadv1.BatchCreateLeadsResponse); ok && anyValues(r) {
		if b, ok := encodeLeadBatch(r); ok {
			return b, nil
		}
	}
	return proto.Marshal(resp)
}

// anyValues reports whether a lead of r has custom values: without any,
// one proto.Marshal is the cheaper way.
func anyValues(r *leadv1.BatchCreateLeadsResponse) bool {
	for _, res := range r.GetResults() {
		if len(res.GetLead().GetCustomFields()) > 0 {
			return true
		}
	}
	return false
}

// encodeLeadBatch writes r, or gives up (false) on anything it does not
// write exactly: unknown fields, a nil result, a value of a kind the
// creates never answer (an object) or text that is not UTF-8 (which
// proto.Marshal refuses).
func encodeLeadBatch(r *leadv1.BatchCreateLeadsResponse) ([]byte, bool) {
	if len(r.ProtoReflect().GetUnknown()) > 0 {
		return nil, false
	}
	var out, one, vals, tmp []byte
	for _, res := range r.GetResults() {
		if res == nil {
			return nil, false
		}
		l := res.GetLead()
		var m map[string]*structpb.Value
		if l != nil {
			m, l.CustomFields = l.CustomFields, nil
		}
		var err error
		one, err = proto.MarshalOptions{}.MarshalAppend(one[:0], res)
		if l != nil {
			l.CustomFields = m
		}
		if err != nil {
			return nil, false
		}
		if len(m) > 0 {
			vals = vals[:0]
			for k, v := range m {
				var ok bool
				if vals, tmp, ok = appendWireEntry(vals, tmp, k, v); !ok {
					return nil, false
				}
			}
			one = protowire.AppendTag(one, leadField, protowire.BytesType)
			one = protowire.AppendBytes(one, vals)
		}
		if out == nil {
			// Room for results about the size of the first: the answer
			// grows once, rather than doubling its way up.
			out = make([]byte, 0, (len(one)+4)*len(r.GetResults())*5/4)
		}
		out = protowire.AppendTag(out, resultsField, protowire.BytesType)
		out = protowire.AppendBytes(out, one)
	}
	return out, true
}

// appendWireEntry appends one map entry of a lead's custom_fields; tmp is
// scratch space for the value, returned for the next entry.
func appendWireEntry(b, tmp []byte, k string, v *structpb.Value) ([]byte, []byte, bool) {
	if v == nil || !utf8.ValidString(k) {
		return b, tmp, false
	}
	vb, ok := appendWireValue(tmp[:0], v)
	if !ok {
		return b, vb, false
	}
	b = protowire.AppendTag(b, valuesField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(protowire.SizeTag(1)+protowire.SizeBytes(len(k))+protowire.SizeTag(2)+protowire.SizeBytes(len(vb))))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, k)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendBytes(b, vb), vb, true
}

// appendWireValue appends the fields of a google.protobuf.Value.
func appendWireValue(b []byte, v *structpb.Value) ([]byte, bool) {
	if len(v.ProtoReflect().GetUnknown()) > 0 {
		return b, false
	}
	switch k := v.GetKind().(type) {
	case nil:
		return b, true
	case *structpb.Value_NullValue:
		b = protowire.AppendTag(b, nullField, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(k.NullValue)), true
	case *structpb.Value_NumberValue:
		b = protowire.AppendTag(b, numberField, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(k.NumberValue)), true
	case *structpb.Value_StringValue:
		if !utf8.ValidString(k.StringValue) {
			return b, false
		}
		b = protowire.AppendTag(b, stringField, protowire.BytesType)
		return protowire.AppendString(b, k.StringValue), true
	case *structpb.Value_BoolValue:
		b = protowire.AppendTag(b, boolField, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(k.BoolValue)), true
	case *structpb.Value_ListValue:
		if k.ListValue == nil || len(k.ListValue.ProtoReflect().GetUnknown()) > 0 {
			return b, false
		}
		var items []byte
		for _, it := range k.ListValue.GetValues() {
			if it == nil {
				return b, false
			}
			ib, ok := appendWireValue(nil, it)
			if !ok {
				return b, false
			}
			items = protowire.AppendTag(items, itemsField, protowire.BytesType)
			items = protowire.AppendBytes(items, ib)
		}
		b = protowire.AppendTag(b, listField, protowire.BytesType)
		return protowire.AppendBytes(b, items), true
	}
	return b, false
}
