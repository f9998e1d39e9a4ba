// Package fieldmask reads the update_mask of an AIP-134 update: which
// fields of the resource the request sets or clears. Over REST the mask is
// derived from the JSON merge patch (see jsoncodec); over RPC the client
// sends it, or leaves it out to mean the fields it populated.
package fieldmask

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/svat/partnerapi/internal/contract/apierror"
)

// Rules say which paths of a resource an update may name.
type Rules struct {
	// Writable lists the paths that may be set or cleared; a path
	// "value.amount" makes its parent "value" writable too. "*" names
	// every top-level one; "custom_fields.*" any key of a map field.
	Writable []string
	// ReadOnly lists the paths that exist but may not be updated, with why.
	ReadOnly map[string]string
}

// Paths returns the set of paths mask names, checked against rules. A nil
// or empty mask means the populated top-level fields of resource
// (AIP-134): a client library that sends an empty mask for "none given"
// must not have its change dropped. A path
// that is read-only, unknown or repeated is malformed input (400), named
// by its JSON name so a REST caller recognises the member it sent.
func Paths(mask *fieldmaskpb.FieldMask, resource proto.Message, rules Rules) (map[string]bool, error) {
	md := resource.ProtoReflect().Descriptor()
	var paths []string
	if len(mask.GetPaths()) == 0 {
		resource.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			paths = append(paths, string(fd.Name()))
			return true
		})
	} else {
		paths = mask.GetPaths()
	}
	writable := map[string]bool{}
	for _, w := range rules.Writable {
		writable[w] = true
		if parent, _, nested := strings.Cut(w, "."); nested {
			writable[parent] = true
		}
	}
	out := map[string]bool{}
	for _, p := range paths {
		if p == "*" {
			for _, w := range rules.Writable {
				if !strings.Contains(w, ".") {
					out[w] = true
				}
			}
			continue
		}
		// A path below a member that cannot be updated at all
		// ("contact.email" of an inline contact) is named by that member,
		// as the caller sent it.
		if top, _, nested := strings.Cut(p, "."); nested && !writable[top] {
			p = top
		}
		if why, ok := rules.ReadOnly[p]; ok {
			return nil, invalid(jsonPath(md, p), why)
		}
		if top, key, nested := strings.Cut(p, "."); nested && key != "" && writable[top+".*"] {
			// A key of a map (custom_fields.budget): named as sent.
			if out[p] {
				return nil, invalid(jsonPath(md, top)+"."+key, "is named twice")
			}
			out[p] = true
			continue
		}
		if !writable[p] {
			return nil, invalid(jsonPath(md, p), "is not a field that can be updated")
		}
		if out[p] {
			return nil, invalid(jsonPath(md, p), "is named twice")
		}
		out[p] = true
	}
	return out, nil
}

// Touches reports whether paths set or clear field or any of its nested
// fields.
func Touches(paths map[string]bool, field string) bool {
	if paths[field] {
		return true
	}
	for p := range paths {
		if strings.HasPrefix(p, field+".") {
			return true
		}
	}
	return false
}

// invalid is the 400 for a member that may not be updated, naming it as
// the caller sent it (over REST a member of the patch, over RPC a path of
// its mask, both in JSON names): never "updateMask", a term a REST caller
// never sent.
func invalid(field, why string) error {
	msg := field + " " + why
	e := apierror.Malformed(msg)
	e.Fields = []apierror.FieldViolation{{Field: field, Code: "read_only", Message: msg}}
	return e
}

// jsonPath spells a proto path with JSON names, as far as md knows it.
func jsonPath(md protoreflect.MessageDescriptor, path string) string {
	parts := strings.Split(path, ".")
	for i, part := range parts {
		if md == nil {
			break
		}
		fd := md.Fields().ByName(protoreflect.Name(part))
		if fd == nil {
			break
		}
		parts[i] = fd.JSONName()
		md = fd.Message()
	}
	return strings.Join(parts, ".")
}

// FromJSON returns the update mask, in its JSON form ("firstName,value.amount"),
// of a JSON merge patch (RFC 7396) of a message of type md: every member
// the patch sends, null or not, and inside a member that is an object of a
// message type (not a well-known type), the members of that object
// instead. Members are matched by JSON or proto name; ones md does not know
// are left for the JSON decoder to refuse.
func FromJSON(md protoreflect.MessageDescriptor, patch map[string]any) string {
	var out []string
	var walk func(md protoreflect.MessageDescriptor, prefix string, obj map[string]any)
	walk = func(md protoreflect.MessageDescriptor, prefix string, obj map[string]any) {
		for k, v := range obj {
			fd := field(md, k)
			if fd == nil {
				continue
			}
			path := prefix + fd.JSONName()
			if emptyMap(fd, v) {
				continue
			}
			if sub, ok := mergeable(fd, v); ok {
				walk(fd.Message(), path+".", sub)
				continue
			}
			out = append(out, path)
		}
	}
	walk(md, "", patch)
	slices.Sort(out)
	return strings.Join(out, ",")
}

// MergesNothing reports whether a merge patch of a message of type md
// changes nothing: it is {} or holds only empty objects of message fields
// ({"value":{}}), whose merge leaves their fields as they are. Its mask is
// empty, which must not be read as "every populated field".
func MergesNothing(md protoreflect.MessageDescriptor, patch map[string]any) bool {
	for k, v := range patch {
		fd := field(md, k)
		if fd == nil {
			return false
		}
		if emptyMap(fd, v) {
			continue
		}
		sub, ok := mergeable(fd, v)
		if !ok || !MergesNothing(fd.Message(), sub) {
			return false
		}
	}
	return true
}

// field finds a member of md by JSON or proto name.
func field(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	if fd := md.Fields().ByJSONName(name); fd != nil {
		return fd
	}
	return md.Fields().ByName(protoreflect.Name(name))
}

// mergeable returns v as an object when a patch merges it into fd, a
// singular field of a message type (not a well-known type), member by
// member.
func mergeable(fd protoreflect.FieldDescriptor, v any) (map[string]any, bool) {
	sub, isObj := v.(map[string]any)
	return sub, isObj && fd.Message() != nil && !fd.IsList() && !fd.IsMap() &&
		!strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.")
}

// emptyMap reports whether v is {} sent for a map field: a merge patch of
// no keys, which changes nothing ({"customFields": {}}).
func emptyMap(fd protoreflect.FieldDescriptor, v any) bool {
	m, ok := v.(map[string]any)
	return ok && fd.IsMap() && len(m) == 0
}
