package jsoncodec

import (
	"bytes"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
)

// Custom values (map<string, google.protobuf.Value>, product.md "Custom
// fields") are most of the work of reading a lead that carries them:
// protojson builds each Value by reflection, about 1.2 µs a value, and a
// lead source sends ten on every lead (make bench, line (e10)). So
// [decodeValues] reads those members itself, without reflection, and lets
// protojson read the rest of the body with them cut out. It reads only
// what it can read exactly as protojson would; anything else (a body that
// is not valid JSON, a duplicate member or key, a number protojson
// refuses, a member under its proto name, values nested deeper than maxValueDepth)
// makes it give up, and the whole body goes through protojson as before,
// with protojson's errors. TestDecodeValuesMatchesProtojson holds the two
// to the same messages.

// maxValueDepth bounds the nesting of one custom value and of the
// messages above it; deeper bodies go the slow way.
const maxValueDepth = 32

// valueCut is one custom values member cut out of the body: the map, the
// field, and the way from the root message to the message holding it.
type valueCut struct {
	path []valueStep
	fd   protoreflect.FieldDescriptor
	m    map[string]*structpb.Value
}

// valueStep is one field on the way down: a message field, and the index
// of the element for a list of messages (-1 for a singular field).
type valueStep struct {
	fd    protoreflect.FieldDescriptor
	index int
}

// valueDescriptor is google.protobuf.Value's.
var valueDescriptor = (&structpb.Value{}).ProtoReflect().Descriptor()

// isValueMap reports a map<string, google.protobuf.Value> field.
func isValueMap(fd protoreflect.FieldDescriptor) bool {
	return fd.IsMap() && fd.MapValue().Message() != nil && fd.MapValue().Message().FullName() == valueDescriptor.FullName()
}

// customFieldsName is the JSON name of every custom values field: a body
// without it has none to read.
var customFieldsName = []byte(`"customFields"`)

// valueMapsCache is hasValueMaps' answer per message name.
var valueMapsCache sync.Map

// hasValueMaps reports whether md has a custom values field at any
// depth, cached per descriptor.
func hasValueMaps(md protoreflect.MessageDescriptor) bool {
	if v, ok := valueMapsCache.Load(md.FullName()); ok {
		return v.(bool)
	}
	v := findValueMaps(md, map[protoreflect.FullName]bool{})
	valueMapsCache.Store(md.FullName(), v)
	return v
}

func findValueMaps(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if isValueMap(fd) {
			return true
		}
		if !fd.IsMap() && fd.Message() != nil && !wellKnown(fd.Message()) && findValueMaps(fd.Message(), seen) {
			return true
		}
	}
	return false
}

// wellKnown reports a google.protobuf message, whose JSON is not an
// object of its fields.
func wellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile() != nil && md.ParentFile().Package() == "google.protobuf"
}

// decodeValues unmarshals b into msg as protojson does, reading the
// custom values members itself; ok is false when it did not (msg is then
// untouched or reset, and the caller decodes the slow way).
func decodeValues(b []byte, msg proto.Message) (ok bool) {
	md := msg.ProtoReflect().Descriptor()
	if !bytes.Contains(b, customFieldsName) || !hasValueMaps(md) {
		return false
	}
	s := valueScanner{b: b, src: string(b)}
	var cuts []valueCut
	var spans [][2]int
	s.ws()
	if !s.object(md, nil, &cuts, &spans, 0) {
		return false
	}
	s.ws()
	if s.i != len(b) || len(cuts) == 0 {
		return false
	}
	rest := make([]byte, 0, len(b))
	at := 0
	for _, sp := range spans {
		rest = append(rest, b[at:sp[0]]...)
		at = sp[1]
	}
	rest = append(rest, b[at:]...)
	if err := (protojson.UnmarshalOptions{}).Unmarshal(rest, msg); err != nil {
		proto.Reset(msg)
		return false
	}
	for _, c := range cuts {
		m := msg.ProtoReflect()
		for _, st := range c.path {
			if st.index < 0 {
				m = m.Mutable(st.fd).Message()
				continue
			}
			l := m.Mutable(st.fd).List()
			if st.index >= l.Len() {
				proto.Reset(msg)
				return false
			}
			m = l.Get(st.index).Message()
		}
		if len(c.m) == 0 {
			continue
		}
		if setValues(m.Interface(), c.fd, c.m) {
			continue
		}
		mp := m.Mutable(c.fd).Map()
		for k, v := range c.m {
			mp.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfMessage(v.ProtoReflect()))
		}
	}
	return true
}

// valueScanner reads a JSON body from b[i:]. src is b as a string, made
// once: a string without escapes is a piece of it, not a copy of its
// own, and the Values come from slabs, so that the ten values of a lead
// cost a few allocations rather than forty (make bench, (e10) and (f10)).
type valueScanner struct {
	b   []byte
	src string
	i   int

	values  slab[structpb.Value]
	strs    slab[structpb.Value_StringValue]
	numbers slab[structpb.Value_NumberValue]
	bools   slab[structpb.Value_BoolValue]
}

// slab hands out the elements of slices it allocates a few at a time:
// one allocation for many small objects that live and die together (the
// values of one body).
type slab[T any] struct{ free []T }

// next is a new zero element.
func (s *slab[T]) next() *T {
	if len(s.free) == 0 {
		s.free = make([]T, 16)
	}
	p := &s.free[0]
	s.free = s.free[1:]
	return p
}

// newString, newNumber and newBool are structpb's NewStringValue,
// NewNumberValue and NewBoolValue from the scanner's slabs.
func (s *valueScanner) newString(v string) *structpb.Value {
	k := s.strs.next()
	k.StringValue = v
	out := s.values.next()
	out.Kind = k
	return out
}

func (s *valueScanner) newNumber(v float64) *structpb.Value {
	k := s.numbers.next()
	k.NumberValue = v
	out := s.values.next()
	out.Kind = k
	return out
}

func (s *valueScanner) newBool(v bool) *structpb.Value {
	k := s.bools.next()
	k.BoolValue = v
	out := s.values.next()
	out.Kind = k
	return out
}

func (s *valueScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space, 0 at the end.
func (s *valueScanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *valueScanner) eat(c byte) bool {
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

// object reads an object of message md at s.i, cutting the custom values
// members: their spans go to spans, their maps to cuts. A member cut
// after a kept one takes the comma before it; one with no kept member
// before it takes the comma after it, so that what is left is JSON.
func (s *valueScanner) object(md protoreflect.MessageDescriptor, path []valueStep, cuts *[]valueCut, spans *[][2]int, depth int) bool {
	if depth > maxValueDepth || !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return true
	}
	fields := md.Fields()
	var seenLow uint64 // fields numbered below 64, as bits: no map to make
	var seen map[protoreflect.FieldNumber]bool
	kept := false // a member before this one stays
	prevEnd := 0  // the end of the previous member's value
	for {
		s.ws()
		start := s.i
		key, ok := s.str()
		if !ok || !s.eat(':') {
			return false
		}
		fd := fields.ByJSONName(key)
		if fd == nil {
			// A proto name ("custom_fields"), refused the slow way with
			// its path; an unknown member fails protojson below.
			if fields.ByTextName(key) != nil {
				return false
			}
		}
		if fd != nil {
			n := fd.Number()
			switch {
			case n < 64 && seenLow&(1<<n) != 0:
				return false // a duplicate: protojson's error
			case n < 64:
				seenLow |= 1 << n
			default:
				if seen == nil {
					seen = map[protoreflect.FieldNumber]bool{}
				}
				if seen[n] {
					return false
				}
				seen[n] = true
			}
		}
		cut := false
		switch {
		case fd != nil && isValueMap(fd) && s.peek() == '{':
			m, ok := s.valueMap(1)
			if !ok {
				return false
			}
			*cuts = append(*cuts, valueCut{path: append([]valueStep(nil), path...), fd: fd, m: m})
			cut = true
		case fd != nil && !fd.IsMap() && !fd.IsList() && fd.Message() != nil && !wellKnown(fd.Message()) && s.peek() == '{':
			if !s.object(fd.Message(), append(path, valueStep{fd, -1}), cuts, spans, depth+1) {
				return false
			}
		case fd != nil && fd.IsList() && fd.Message() != nil && !wellKnown(fd.Message()) && s.peek() == '[':
			s.i++
			if !s.eat(']') {
				for n := 0; ; n++ {
					if s.peek() == '{' {
						if !s.object(fd.Message(), append(path, valueStep{fd, n}), cuts, spans, depth+1) {
							return false
						}
					} else if !s.skip(depth + 1) {
						return false
					}
					if s.eat(',') {
						continue
					}
					if !s.eat(']') {
						return false
					}
					break
				}
			}
		default:
			if !s.skip(depth + 1) {
				return false
			}
		}
		end := s.i
		switch {
		case cut && kept:
			*spans = append(*spans, [2]int{prevEnd, end})
		case cut:
			if s.eat(',') {
				*spans = append(*spans, [2]int{start, s.i})
				continue
			}
			*spans = append(*spans, [2]int{start, end})
		default:
			kept = true
		}
		prevEnd = end
		if s.eat(',') {
			continue
		}
		return s.eat('}')
	}
}

// skip reads any JSON value without keeping it.
func (s *valueScanner) skip(depth int) bool {
	if depth > maxValueDepth {
		return false
	}
	switch s.peek() {
	case '{':
		s.i++
		if s.eat('}') {
			return true
		}
		for {
			s.ws()
			if _, ok := s.str(); !ok || !s.eat(':') || !s.skip(depth+1) {
				return false
			}
			if s.eat(',') {
				continue
			}
			return s.eat('}')
		}
	case '[':
		s.i++
		if s.eat(']') {
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			if s.eat(',') {
				continue
			}
			return s.eat(']')
		}
	case '"':
		_, ok := s.str()
		return ok
	case 't':
		return s.lit("true")
	case 'f':
		return s.lit("false")
	case 'n':
		return s.lit("null")
	default:
		_, ok := s.num()
		return ok
	}
}

func (s *valueScanner) lit(w string) bool {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

// value reads one google.protobuf.Value as protojson does.
func (s *valueScanner) value(depth int) (*structpb.Value, bool) {
	if depth > maxValueDepth {
		return nil, false
	}
	switch s.peek() {
	case '{':
		m, ok := s.valueMap(depth)
		if !ok {
			return nil, false
		}
		return structpb.NewStructValue(&structpb.Struct{Fields: m}), true
	case '[':
		s.i++
		var l []*structpb.Value
		if !s.eat(']') {
			for {
				v, ok := s.value(depth + 1)
				if !ok {
					return nil, false
				}
				l = append(l, v)
				if s.eat(',') {
					continue
				}
				if !s.eat(']') {
					return nil, false
				}
				break
			}
		}
		return structpb.NewListValue(&structpb.ListValue{Values: l}), true
	case '"':
		str, ok := s.str()
		if !ok {
			return nil, false
		}
		return s.newString(str), true
	case 't':
		return s.newBool(true), s.lit("true")
	case 'f':
		return s.newBool(false), s.lit("false")
	case 'n':
		return structpb.NewNullValue(), s.lit("null")
	default:
		f, ok := s.num()
		if !ok {
			return nil, false
		}
		return s.newNumber(f), true
	}
}

// valueMap reads an object of values (a custom values member, or a
// Struct nested depth deep).
func (s *valueScanner) valueMap(depth int) (map[string]*structpb.Value, bool) {
	if !s.eat('{') {
		return nil, false
	}
	m := map[string]*structpb.Value{}
	if s.eat('}') {
		return m, true
	}
	for {
		s.ws()
		k, ok := s.str()
		if !ok || !s.eat(':') {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		v, ok := s.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[k] = v
		if s.eat(',') {
			continue
		}
		if !s.eat('}') {
			return nil, false
		}
		return m, true
	}
}

// num reads a number in JSON's grammar, as a float64 protojson would
// accept.
func (s *valueScanner) num() (float64, bool) {
	start := s.i
	b := s.b
	i := s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	// A number runs into no letter or digit (protojson: "invalid value").
	if i < len(b) && (b[i] >= 'a' && b[i] <= 'z' || b[i] >= 'A' && b[i] <= 'Z' || b[i] == '_' || b[i] >= 0x80) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b[start:i]), 64)
	if err != nil {
		return 0, false
	}
	s.i = i
	return f, true
}

// str reads a JSON string at s.i: valid UTF-8, no control character
// unescaped, and no escaped surrogate (left to protojson).
func (s *valueScanner) str() (string, bool) {
	b := s.b
	if s.i >= len(b) || b[s.i] != '"' {
		return "", false
	}
	i := s.i + 1
	start := i
	for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 && b[i] < 0x80 {
		i++
	}
	if i < len(b) && b[i] == '"' {
		s.i = i + 1
		if len(s.src) == len(b) {
			return s.src[start:i], true
		}
		return string(b[start:i]), true
	}
	out := append([]byte(nil), b[start:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return "", false
			}
			s.i = i + 1
			return string(out), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if i+1 >= len(b) {
				return "", false
			}
			i++
			switch b[i] {
			case '"', '\\', '/':
				out = append(out, b[i])
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				if i+4 >= len(b) {
					return "", false
				}
				r, err := strconv.ParseUint(string(b[i+1:i+5]), 16, 32)
				if err != nil || utf16.IsSurrogate(rune(r)) {
					return "", false
				}
				out = utf8.AppendRune(out, rune(r))
				i += 4
			default:
				return "", false
			}
			i++
		default:
			out = append(out, c)
			i++
		}
	}
	return "", false
}

// setValues sets the custom values of the messages that carry them
// without reflection; false for another message or field.
func setValues(msg proto.Message, fd protoreflect.FieldDescriptor, m map[string]*structpb.Value) bool {
	if fd.Name() != "custom_fields" {
		return false
	}
	switch x := msg.(type) {
	case *leadv1.Lead:
		x.CustomFields = m
	case *leadv1.LeadContact:
		x.CustomFields = m
	case *contactv1.Contact:
		x.CustomFields = m
	default:
		return false
	}
	return true
}
