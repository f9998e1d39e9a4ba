package validate

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// EnumValues spells the values of the enum e as the API does: each name
// without the enum's prefix, in lower case, in number order, leaving out
// the zero value (unspecified). An enum of the protos is the one list of
// a field's values (lead statuses): the handler checks against this, and
// the OpenAPI document is built from it.
func EnumValues(e protoreflect.EnumDescriptor) []string {
	values := e.Values()
	prefix := strings.TrimSuffix(string(values.ByNumber(0).Name()), "UNSPECIFIED")
	var out []string
	for i := range values.Len() {
		v := values.Get(i)
		if v.Number() != 0 {
			out = append(out, strings.ToLower(strings.TrimPrefix(string(v.Name()), prefix)))
		}
	}
	return out
}
