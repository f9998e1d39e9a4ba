package jsoncodec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svat/partnerapi/internal/contract/apierror"
)

// MemberError is a JSON body member the message cannot take: an unknown
// one ("bogus"), a field's proto name where its JSON name belongs
// ("first_name" for "firstName"), or a value of the wrong JSON type
// ("email": 5). protojson accepts both spellings of a field; the contract
// names one, so the other is refused too. Either way the member is named
// as the caller sent it (at any depth: "contact.first_name",
// "leads[2].value.amount").
type MemberError struct {
	// Path is the member as sent, dotted below the top level.
	Path string
	// Code is the field code: CodeUnknownMember or CodeWrongType.
	Code string
	// Message says what to send instead, when that is known.
	Message string
}

// Field codes of a [MemberError]: a member the body may not have, and a
// value protojson refuses for its field (docs/api.md, "Errors").
const (
	CodeUnknownMember = "unknown_member"
	CodeWrongType     = "invalid_format"
)

func (e *MemberError) Error() string { return e.Message }

// APIError is the 400 that names the member.
func (e *MemberError) APIError() *apierror.Error {
	code := e.Code
	if code == "" {
		code = CodeUnknownMember
	}
	a := apierror.Malformed(e.Message)
	a.Fields = []apierror.FieldViolation{{Field: e.Path, Code: code, Message: e.Message}}
	return a
}

// checkMembers returns the first member of the JSON object data, in key
// order at each level, that md does not have under its JSON name, or nil.
// It descends into message fields and lists of them, but not into maps
// or the well-known types (a Timestamp is a string; a Struct has any
// members). data must be valid JSON.
func checkMembers(data []byte, md protoreflect.MessageDescriptor, prefix string) *MemberError {
	obj, keys := members(data)
	for _, k := range keys {
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			return unknownMember(md, prefix, k)
		}
		sub := fd.Message()
		if sub == nil || fd.IsMap() || strings.HasPrefix(string(sub.FullName()), "google.protobuf.") {
			continue
		}
		if !fd.IsList() {
			if e := checkMembers(obj[k], sub, prefix+k+"."); e != nil {
				return e
			}
			continue
		}
		var items []json.RawMessage
		_ = json.Unmarshal(obj[k], &items)
		for _, item := range items {
			if e := checkMembers(item, sub, prefix+k+"."); e != nil {
				return e
			}
		}
	}
	return nil
}

// unknownMember says what k should have been: the JSON name of the field
// whose proto name it is, or, for a member of the one message field a
// request wraps (a REST-shaped body sent to an RPC), where it belongs.
func unknownMember(md protoreflect.MessageDescriptor, prefix, k string) *MemberError {
	path := prefix + k
	if fd := md.Fields().ByName(protoreflect.Name(k)); fd != nil {
		return &MemberError{Path: path, Code: CodeUnknownMember, Message: "unknown member " + path + ": send it as " + prefix + fd.JSONName()}
	}
	if prefix == "" {
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if sub := fd.Message(); sub != nil && !fd.IsList() && !fd.IsMap() && sub.Fields().ByJSONName(k) != nil {
				return &MemberError{Path: path, Code: CodeUnknownMember, Message: "unknown member " + path + ": this request takes it inside " + fd.JSONName() + ` (e.g. {"` + fd.JSONName() + `": {"` + k + `": …}})`}
			}
		}
	}
	return &MemberError{Path: path, Code: CodeUnknownMember, Message: "unknown member " + path + ": the body has no such member"}
}

// protoSpellings are the quoted proto names, at any depth of md, that
// differ from their JSON names: a body that contains none of them cannot
// use one, so the walk of [checkMembers] is needed only when one appears.
var protoSpellings sync.Map // protoreflect.FullName → [][]byte

func spellings(md protoreflect.MessageDescriptor) [][]byte {
	if v, ok := protoSpellings.Load(md.FullName()); ok {
		return v.([][]byte)
	}
	var out [][]byte
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] || strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
			return
		}
		seen[md.FullName()] = true
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if string(fd.Name()) != fd.JSONName() {
				out = append(out, []byte(`"`+string(fd.Name())+`"`))
			}
			if sub := fd.Message(); sub != nil && !fd.IsMap() {
				walk(sub)
			}
		}
	}
	walk(md)
	protoSpellings.Store(md.FullName(), out)
	return out
}

// mentionsProtoName reports whether data may use a proto spelling of one
// of md's fields.
func mentionsProtoName(data []byte, md protoreflect.MessageDescriptor) bool {
	for _, s := range spellings(md) {
		if bytes.Contains(data, s) {
			return true
		}
	}
	return false
}

// wrongValue returns the first member of the JSON object data, in key
// order at each level, whose value protojson refuses for its field (a
// number for a string, an object for a number, a timestamp it cannot
// read), named as sent ("email", "value.amount", "leads[2].email"), or
// nil. m is an empty message of data's type. It runs only once protojson
// has refused the body and checkMembers found every member known, so its
// cost (one protojson run a member) falls on bad requests alone.
func wrongValue(data []byte, m protoreflect.Message, prefix string) *MemberError {
	obj, keys := members(data)
	md := m.Descriptor()
	for _, k := range keys {
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			continue
		}
		one, err := json.Marshal(map[string]json.RawMessage{k: obj[k]})
		if err != nil || protojson.Unmarshal(one, m.New().Interface()) == nil {
			continue
		}
		path := prefix + k
		sub := fd.Message()
		inner := sub != nil && !fd.IsMap() && !strings.HasPrefix(string(sub.FullName()), "google.protobuf.")
		var items []json.RawMessage
		switch {
		case fd.IsList() && json.Unmarshal(obj[k], &items) == nil:
			// The bad value is an item, or inside one.
			for i, item := range items {
				if i == maxProbedItems {
					break // named as the list below
				}
				at := fmt.Sprintf("%s[%d]", path, i)
				if !inner {
					one, err := json.Marshal(map[string][]json.RawMessage{k: {item}})
					if err == nil && protojson.Unmarshal(one, m.New().Interface()) != nil {
						return &MemberError{Path: at, Code: CodeWrongType, Message: at + ": " + expectedOne(fd)}
					}
					continue
				}
				if t := bytes.TrimSpace(item); len(t) == 0 || t[0] != '{' {
					return &MemberError{Path: at, Code: CodeWrongType, Message: at + ": must be an object"}
				}
				if e := wrongValue(item, m.NewField(fd).List().NewElement().Message(), at+"."); e != nil {
					return e
				}
			}
		case inner && !fd.IsList():
			// A message of the right shape: the bad value is inside.
			if t := bytes.TrimSpace(obj[k]); len(t) > 0 && t[0] == '{' {
				if e := wrongValue(obj[k], m.NewField(fd).Message(), path+"."); e != nil {
					return e
				}
			}
		}
		return &MemberError{Path: path, Code: CodeWrongType, Message: path + ": " + expected(fd, obj[k])}
	}
	return nil
}

// maxProbedItems bounds the items of one list wrongValue tries one by one
// (each a protojson run of its own): past it, the list is named. No list
// of a request may hold more (a batch holds 100), so a bad body of a
// million short items costs a few protojson runs, not a million.
const maxProbedItems = 100

// typeProblem tells whether protojson refused a body for a value of the
// wrong JSON type (what wrongValue names), not for a duplicate member or
// text that is not valid JSON (its own words say those best).
func typeProblem(err error) bool {
	m := err.Error()
	return strings.Contains(m, "invalid value for ") || strings.Contains(m, "unexpected token ") ||
		strings.Contains(m, "invalid google.protobuf.") || strings.Contains(m, "value out of range")
}

// expected says what JSON fd takes, for a value v it refused.
func expected(fd protoreflect.FieldDescriptor, v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	switch {
	case fd.IsMap():
		return "must be an object"
	case fd.IsList() && (len(v) == 0 || v[0] != '['):
		return "must be an array"
	case fd.IsList():
		return "must be an array whose items are each " + strings.TrimPrefix(expectedOne(fd), "must be ")
	}
	return expectedOne(fd)
}

// expectedOne says what JSON one value of fd takes.
func expectedOne(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return "must be a string"
	case protoreflect.BoolKind:
		return "must be true or false"
	case protoreflect.BytesKind:
		return "must be a base64 string"
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return "must be a number"
	case protoreflect.EnumKind:
		return "must be one of the values the field documents"
	case protoreflect.MessageKind, protoreflect.GroupKind:
		switch fd.Message().FullName() {
		case "google.protobuf.Timestamp":
			return "must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z"
		case "google.protobuf.FieldMask":
			return "must be a string of comma-separated member names"
		case "google.protobuf.StringValue":
			return "must be a string or null"
		case "google.protobuf.BoolValue":
			return "must be true, false or null"
		case "google.protobuf.Int32Value", "google.protobuf.Int64Value", "google.protobuf.UInt32Value", "google.protobuf.UInt64Value":
			return "must be an integer or null"
		case "google.protobuf.DoubleValue", "google.protobuf.FloatValue":
			return "must be a number or null"
		}
		return "must be an object"
	}
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return "must be a whole number from -2147483648 to 2147483647"
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return "must be a whole number from 0 to 4294967295"
	}
	return "must be a whole number"
}

// members is the JSON object data's members and their names in order;
// nothing when data is not an object.
func members(data []byte) (map[string]json.RawMessage, []string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil || obj == nil {
		return nil, nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return obj, keys
}
