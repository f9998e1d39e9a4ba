// Package validate checks and normalises input fields and collects every
// violation, so a partner sees all problems of a request at once.
package validate

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/svat/partnerapi/internal/contract/apierror"
)

// Violation codes.
const (
	Required      = "required"
	TooLong       = "too_long"
	InvalidFormat = "invalid_format"
	InvalidValue  = "invalid_value"
	NotFound      = "not_found"
)

// Errors collects field violations.
type Errors struct{ list []apierror.FieldViolation }

// Add records a violation.
func (v *Errors) Add(field, code, message string) {
	v.list = append(v.list, apierror.FieldViolation{Field: field, Code: code, Message: message})
}

// has reports whether field already has a violation.
func (v *Errors) has(field string) bool {
	for _, f := range v.list {
		if f.Field == field {
			return true
		}
	}
	return false
}

// Err returns a validation error, or nil when nothing was recorded.
func (v *Errors) Err() error {
	if len(v.list) == 0 {
		return nil
	}
	return apierror.Validation(v.list...)
}

// CleanTextMessage explains a CleanText failure to the caller.
const CleanTextMessage = "must be valid UTF-8 without NUL characters"

// CleanText reports whether s is valid UTF-8 without a NUL character.
// PostgreSQL text can hold neither, so anything stored or compared against
// stored text must pass this first, or the database's refusal would be a
// 500 instead of the caller's 4xx.
func CleanText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// Text trims an optional single-line text field, refuses the characters
// [TextProblem] names (invalid_format) and checks its length in
// characters. An empty value counts as absent and becomes nil.
func (v *Errors) Text(field string, s *string, maxChars int) *string {
	return v.text(field, s, maxChars, SingleLine)
}

// MultilineText is [Errors.Text] for a field that may span lines (a
// lead's message): it keeps \n, \r and \t.
func (v *Errors) MultilineText(field string, s *string, maxChars int) *string {
	return v.text(field, s, maxChars, MultiLine)
}

func (v *Errors) text(field string, s *string, maxChars int, lines Lines) *string {
	if s == nil {
		return nil
	}
	t := strings.TrimSpace(*s)
	if t == "" {
		return nil
	}
	// One pass checks the characters and counts them.
	chars, problem := scanText(t, lines)
	if problem != "" {
		v.Add(field, InvalidFormat, problem)
		return &t
	}
	if chars > maxChars {
		v.Add(field, TooLong, "must be at most "+strconv.Itoa(maxChars)+" characters")
	}
	return &t
}

// Email trims, lower-cases and checks an optional email address.
func (v *Errors) Email(field string, s *string) *string {
	t := v.Text(field, s, 254)
	if t == nil {
		return nil
	}
	// ASCII letters only: strings.ToLower maps some non-ASCII letters (the
	// Kelvin sign U+212A) to ASCII ones, which would let them past the
	// ASCII-only check as another address.
	e := strings.Map(asciiLower, *t)
	if !v.has(field) && !ValidEmail(e) {
		v.Add(field, InvalidFormat, "must be an email address such as name@example.com")
	}
	return &e
}

// asciiLower lower-cases ASCII letters only.
func asciiLower(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + ('a' - 'A')
	}
	return r
}

// Phone trims and checks an optional E.164 number.
func (v *Errors) Phone(field string, s *string) *string {
	t := v.Text(field, s, 16)
	if t != nil && !v.has(field) && !ValidE164(*t) {
		v.Add(field, InvalidFormat, "must be in E.164 format: + and up to 15 digits, e.g. +14155550123")
	}
	return t
}

// ValidEmail is a pragmatic RFC 5321 check: one @, a dot-atom local part
// of at most 64 characters, and a domain of at least two DNS labels.
func ValidEmail(e string) bool {
	local, domain, ok := strings.Cut(e, "@")
	if !ok || local == "" || len(local) > 64 || domain == "" || strings.Contains(domain, "@") {
		return false
	}
	if local[0] == '.' || local[len(local)-1] == '.' || strings.Contains(local, "..") {
		return false
	}
	for _, c := range local {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune(".!#$%&'*+/=?^_`{|}~-", c)) {
			return false
		}
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// ValidE164 checks "+" followed by 2 to 15 digits, the first not zero.
func ValidE164(p string) bool {
	if len(p) < 3 || len(p) > 16 || p[0] != '+' || p[1] == '0' {
		return false
	}
	for i := 1; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}

// ValidSlug checks lower-case letters and digits joined by single "_" or
// "-", such as web_form.
func ValidSlug(s string) bool {
	if s == "" {
		return false
	}
	prevSep := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			prevSep = false
		case c == '_' || c == '-':
			if prevSep {
				return false
			}
			prevSep = true
		default:
			return false
		}
	}
	return !prevSep
}

// DirtyField returns the JSON path ("contact.email", "contacts[2].email")
// of the first string field of m, at any depth, that is not CleanText, or
// "" when there is none. The RPC layer runs it on every request of the
// data services, so a NUL or invalid UTF-8 in any field or filter, today's
// or one added later, is the caller's 4xx naming the field rather than
// PostgreSQL's refusal and a 500.
func DirtyField(m protoreflect.Message) string {
	// A loop over the descriptor rather than m.Range: no closure to
	// allocate on every request.
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if !m.Has(f) {
			continue
		}
		if f.IsMap() {
			// Custom values: the Go map itself, walked without
			// reflection (a reflective walk allocates every key).
			if g, ok := m.Interface().(valuesGetter); ok && f.Name() == "custom_fields" {
				if d := dirtyValues(g.GetCustomFields(), f.JSONName()); d != "" {
					return d
				}
				continue
			}
		}
		if d := dirtyValue(f, m.Get(f), f.JSONName()); d != "" {
			return d
		}
	}
	return ""
}

// valuesGetter is a message with custom values (product.md, "Custom
// fields"): its custom_fields field, map<string, google.protobuf.Value>.
type valuesGetter interface {
	GetCustomFields() map[string]*structpb.Value
}

// dirtyValues is dirtyValue of a custom values map at path.
func dirtyValues(m map[string]*structpb.Value, path string) string {
	for key, pv := range m {
		if !CleanText(key) {
			return path
		}
		if pv == nil {
			continue
		}
		if d := dirtyPB(pv); d != "" {
			return path + "." + key + "." + d
		}
	}
	return ""
}

func dirtyValue(f protoreflect.FieldDescriptor, v protoreflect.Value, path string) string {
	switch {
	case f.IsList():
		l := v.List()
		for i := range l.Len() {
			// The element's path is made only for a dirty one: a batch's
			// hundred items would make a hundred.
			if d, dirty := dirtyBelow(f, l.Get(i)); dirty {
				return path + "[" + strconv.Itoa(i) + "]" + d
			}
		}
		return ""
	case f.IsMap():
		var found string
		vf := f.MapValue()
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			key := k.String()
			if !CleanText(key) {
				found = path
				return false
			}
			if vf.Kind() == protoreflect.MessageKind {
				// Custom values: walked without reflection, and the path
				// made only for a dirty one.
				if pv, ok := mv.Message().Interface().(*structpb.Value); ok {
					if d := dirtyPB(pv); d != "" {
						found = path + "." + key + "." + d
					}
					return found == ""
				}
			}
			found = dirtyScalar(vf, mv, path+"."+key)
			return found == ""
		})
		return found
	}
	return dirtyScalar(f, v, path)
}

// dirtyPB is [DirtyField] of a google.protobuf.Value (the path below it,
// as the reflective walk names it), without reflection.
func dirtyPB(v *structpb.Value) string {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		if !CleanText(k.StringValue) {
			return "stringValue"
		}
	case *structpb.Value_ListValue:
		for i, it := range k.ListValue.GetValues() {
			if it == nil {
				continue
			}
			if d := dirtyPB(it); d != "" {
				return "listValue.values[" + strconv.Itoa(i) + "]." + d
			}
		}
	case *structpb.Value_StructValue:
		for key, it := range k.StructValue.GetFields() {
			if !CleanText(key) {
				return "structValue.fields"
			}
			if it == nil {
				continue
			}
			if d := dirtyPB(it); d != "" {
				return "structValue.fields." + key + "." + d
			}
		}
	}
	return ""
}

func dirtyScalar(f protoreflect.FieldDescriptor, v protoreflect.Value, path string) string {
	if d, dirty := dirtyBelow(f, v); dirty {
		return path + d
	}
	return ""
}

// dirtyBelow reports whether v, a value of f, is dirty, and the path
// below v to what is ("" for v itself).
func dirtyBelow(f protoreflect.FieldDescriptor, v protoreflect.Value) (string, bool) {
	switch f.Kind() {
	case protoreflect.StringKind:
		if !CleanText(v.String()) {
			return "", true
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if d := DirtyField(v.Message()); d != "" {
			return "." + d, true
		}
	}
	return "", false
}
