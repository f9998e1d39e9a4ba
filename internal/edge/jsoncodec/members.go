package jsoncodec

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svat/partnerapi/internal/edge/apierror"
)

// MemberError is a JSON body member that the message has not: an unknown
// one ("bogus"), or a field's proto name where its JSON name belongs
// ("first_name" for "firstName"). protojson accepts both spellings of a
// field; the contract names one, so the other is refused too, naming the
// member as the caller sent it (at any depth: "contact.first_name").
type MemberError struct {
	// Path is the member as sent, dotted below the top level.
	Path string
	// Message says what to send instead, when that is known.
	Message string
}

func (e *MemberError) Error() string { return e.Message }

// APIError is the 400 that names the member.
func (e *MemberError) APIError() *apierror.Error {
	a := apierror.Malformed(e.Message)
	a.Fields = []apierror.FieldViolation{{Field: e.Path, Code: "unknown_member", Message: e.Message}}
	return a
}

// checkMembers returns the first member of the JSON object data, in key
// order at each level, that md does not have under its JSON name, or nil.
// It descends into message fields and lists of them, but not into maps
// or the well-known types (a Timestamp is a string; a Struct has any
// members). data must be valid JSON.
func checkMembers(data []byte, md protoreflect.MessageDescriptor, prefix string) *MemberError {
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil || obj == nil {
		return nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
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
		return &MemberError{Path: path, Message: "unknown member " + path + ": send it as " + prefix + fd.JSONName()}
	}
	if prefix == "" {
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if sub := fd.Message(); sub != nil && !fd.IsList() && !fd.IsMap() && sub.Fields().ByJSONName(k) != nil {
				return &MemberError{Path: path, Message: "unknown member " + path + ": this request takes it inside " + fd.JSONName() + ` (e.g. {"` + fd.JSONName() + `": {"` + k + `": …}})`}
			}
		}
	}
	return &MemberError{Path: path, Message: "unknown member " + path + ": the body has no such member"}
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
