package customfield

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/validate"
)

// Limits of values (product.md, "Custom fields").
const (
	MaxText         = 1000
	MaxURL          = 2048
	MaxChoices      = 50
	MaxDigits       = 15
	MaxStoredValues = 64 << 10 // bytes of a record's stored values, all keys together
)

// Violation codes of values beyond the validate package's.
const (
	UnknownMember = "unknown_member"
)

// Values are a record's custom values as stored and answered: key to a
// JSON value already normalised by its type.
type Values map[string]any

// Decode reads a record's stored values (NULL is none). The stored JSON
// is an object of strings, numbers, booleans and lists of strings (what
// the checks store); decodeFast reads that shape without reflection (a
// lead's answer decodes its values once), and anything else goes through
// encoding/json.
func Decode(stored []byte) (Values, error) {
	if len(stored) == 0 {
		return nil, nil
	}
	if out, ok := decodeFast(stored); ok {
		return out, nil
	}
	var out Values
	d := json.NewDecoder(bytes.NewReader(stored))
	d.UseNumber()
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// Encode is vals as stored: NULL (nil) when it holds none. Keys in
// order, as encoding/json writes a map (which the test holds it to).
func (vals Values) Encode() []byte {
	if len(vals) == 0 {
		return nil
	}
	if b, ok := encodeFast(vals); ok {
		return b
	}
	b, err := json.Marshal(map[string]any(vals))
	if err != nil {
		// Values only ever hold strings, json.Numbers, bools and string
		// lists, which always encode.
		panic("encode custom values: " + err.Error())
	}
	return b
}

// Checker checks the values of one request against the live definitions
// of its object. A JSON value of the wrong type and an unknown key are
// malformed input (400), collected in Bad; a value of the right type that
// breaks its rule, or a required field missing, go to the request's 422
// violations.
type Checker struct {
	Defs  []Definition
	byKey map[string]Definition
	// Bad are the 400 violations found so far.
	Bad []apierror.FieldViolation
}

// NewChecker checks values against defs.
func NewChecker(defs []Definition) *Checker {
	return &Checker{Defs: defs, byKey: ByKey(defs)}
}

// Err is the 400 of the malformed values found, or nil.
func (c *Checker) Err() error {
	if len(c.Bad) == 0 {
		return nil
	}
	e := apierror.Malformed(c.Bad[0].Field + ": " + c.Bad[0].Message)
	e.Fields = slices.Clone(c.Bad)
	return e
}

func (c *Checker) bad(field, code, message string) {
	c.Bad = append(c.Bad, apierror.FieldViolation{Field: field, Code: code, Message: field + ": " + message})
}

// Create checks the values of a new record (prefix names the record's
// member: "" or "contact." for a lead's inline contact): every sent key
// must be defined, each value valid for its type, and every required field
// present. Null and text that trims to nothing are no value.
func (c *Checker) Create(v *validate.Errors, prefix string, sent map[string]*structpb.Value) Values {
	out := c.apply(v, prefix, nil, sent)
	c.required(v, prefix, out)
	return out
}

// Patch merges sent into the stored values cur: with whole (the mask path
// custom_fields), every key of sent is set, or cleared by null, and an
// empty sent clears them all; keys (paths custom_fields.<key>) set or
// clear those keys alone. A required field the patch clears is 422
// required; one already missing (a record written before the field became
// required) is not the patch's doing and passes.
func (c *Checker) Patch(v *validate.Errors, prefix string, cur Values, sent map[string]*structpb.Value, whole bool, keys []string) Values {
	out := make(Values, len(cur))
	for k, val := range cur {
		out[k] = val
	}
	switch {
	case whole && len(sent) == 0:
		out = Values{}
	case whole:
		out = c.apply(v, prefix, out, sent)
	}
	for _, k := range keys {
		if val, ok := sent[k]; ok {
			out = c.apply(v, prefix, out, map[string]*structpb.Value{k: val})
			continue
		}
		if _, ok := c.byKey[k]; !ok {
			c.bad(prefix+"customFields."+k, UnknownMember, "is not a custom field of this workspace")
			continue
		}
		delete(out, k)
	}
	for _, d := range c.Defs {
		if _, had := cur[d.Key]; d.Required && had {
			if _, has := out[d.Key]; !has {
				v.Add(prefix+"customFields."+d.Key, validate.Required, "is required")
			}
		}
	}
	return out
}

// LiveKeys are the keys of every live field (never nil): an update that
// writes values replaces the stored values of these keys with the live
// ones it sends ([Checker.Live]). Other keys are deleted fields', which
// the update leaves as the row holds them (LeadUpdate, ContactUpdate):
// the erasure removes them without a trace a conditional write would see,
// so writing back what was read could restore one it had just removed.
func (c *Checker) LiveKeys() []string {
	keys := make([]string, 0, len(c.Defs))
	for _, d := range c.Defs {
		keys = append(keys, d.Key)
	}
	return keys
}

// Live is vals without the values of deleted fields, which no answer
// shows: what an update compares ([Changed]) to tell whether it changes
// anything a partner sees.
func (c *Checker) Live(vals Values) Values {
	live := make(Values, len(vals))
	for _, d := range c.Defs {
		if v, ok := vals[d.Key]; ok {
			live[d.Key] = v
		}
	}
	return live
}

// required adds the 422 of each required field vals lacks.
func (c *Checker) required(v *validate.Errors, prefix string, vals Values) {
	for _, d := range c.Defs {
		if _, ok := vals[d.Key]; d.Required && !ok {
			v.Add(prefix+"customFields."+d.Key, validate.Required, "is required")
		}
	}
}

// apply checks sent into out (made when nil); a null or empty value
// removes its key.
func (c *Checker) apply(v *validate.Errors, prefix string, out Values, sent map[string]*structpb.Value) Values {
	if out == nil {
		out = make(Values, len(sent))
	}
	if len(sent) > len(c.Defs) && len(sent) > MaxPerObject {
		c.bad(prefix+"customFields", validate.InvalidFormat, "has more members than the workspace has custom fields")
		return out
	}
	keys := make([]string, 0, len(sent))
	for k := range sent {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		d, ok := c.byKey[k]
		if !ok {
			c.bad(prefix+"customFields."+k, UnknownMember, "is not a custom field of this workspace")
			continue
		}
		val, set := c.value(v, d.fieldName(prefix), d, sent[k])
		if !set {
			delete(out, k)
			continue
		}
		out[k] = val
	}
	if out.encodedAtMost() > MaxStoredValues && len(out.Encode()) > MaxStoredValues {
		v.Add(prefix+"customFields", validate.TooLong, "must hold at most "+strconv.Itoa(MaxStoredValues)+" bytes of values")
	}
	return out
}

// encodedAtMost bounds the length of vals' encoding from above without
// making it: every byte of a string escaped as \uXXXX at worst. The exact
// size is needed only when the bound passes [MaxStoredValues], which
// ordinary values never do.
func (vals Values) encodedAtMost() int {
	n := 2
	for k, v := range vals {
		n += 6*len(k) + 4
		switch x := v.(type) {
		case string:
			n += 6*len(x) + 2
		case json.Number:
			n += len(x)
		case bool:
			n += 5
		case []string:
			n += 2
			for _, s := range x {
				n += 6*len(s) + 3
			}
		default:
			return MaxStoredValues + 1 // not bounded here: encode it
		}
	}
	return n
}

// value checks one value of field d: the normalised value and true, or
// false for no value (null, or text that trims to nothing) and for a
// refused one. (No closures here: a lead's ten values would allocate
// them ten times.)
func (c *Checker) value(v *validate.Errors, field string, d Definition, in *structpb.Value) (any, bool) {
	if in == nil {
		return nil, false
	}
	switch in.GetKind().(type) {
	case nil, *structpb.Value_NullValue:
		return nil, false
	}
	switch d.Type {
	case Text, Email, URL, Date, DateTime, Select:
		s, ok := in.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return c.wrong(field, "a string")
		}
		val, problem := str(v, field, d, s.StringValue)
		if problem != "" {
			return invalid(v, field, problem)
		}
		return val, val != nil
	case Number:
		n, ok := in.GetKind().(*structpb.Value_NumberValue)
		if !ok {
			return c.wrong(field, "a number")
		}
		f := n.NumberValue
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return invalid(v, field, "must be a finite number")
		}
		if digits(f) > MaxDigits {
			return invalid(v, field, "must have at most "+strconv.Itoa(MaxDigits)+" significant digits")
		}
		if f == 0 {
			f = 0 // -0 is 0: numeric, as stored, has no negative zero
		}
		return json.Number(FormatNumber(f)), true
	case Boolean:
		b, ok := in.GetKind().(*structpb.Value_BoolValue)
		if !ok {
			return c.wrong(field, "true or false")
		}
		return b.BoolValue, true
	case MultiSelect:
		l, ok := in.GetKind().(*structpb.Value_ListValue)
		if !ok {
			return c.wrong(field, "an array of option values")
		}
		items := l.ListValue.GetValues()
		for i, it := range items {
			if _, ok := it.GetKind().(*structpb.Value_StringValue); !ok {
				c.bad(field+"["+strconv.Itoa(i)+"]", validate.InvalidFormat, "must be a string")
				return nil, false
			}
		}
		if len(items) == 0 || len(items) > MaxChoices {
			return invalid(v, field, "must hold 1 to "+strconv.Itoa(MaxChoices)+" option values")
		}
		// Each option once, in the definition's order: a repeat or a value
		// that is no option is refused.
		picked := func(o string) int {
			n := 0
			for _, it := range items {
				if it.GetStringValue() == o {
					n++
				}
			}
			return n
		}
		out := make([]string, 0, len(items))
		for _, o := range d.Options {
			switch picked(o.Value) {
			case 0:
			case 1:
				out = append(out, o.Value)
			default:
				return invalid(v, field, "must not repeat an option value")
			}
		}
		if len(out) != len(items) {
			for i, it := range items {
				for _, jt := range items[:i] {
					if jt.GetStringValue() == it.GetStringValue() {
						return invalid(v, field, "must not repeat an option value")
					}
				}
			}
			return invalid(v, field, "must hold only option values: "+optionList(d))
		}
		return out, true
	}
	return c.wrong(field, "a value of type "+string(d.Type))
}

// wrong refuses a value of the wrong JSON type (400).
func (c *Checker) wrong(field, want string) (any, bool) {
	c.bad(field, validate.InvalidFormat, "must be "+want)
	return nil, false
}

// invalid refuses a value that breaks its field's rule (422).
func invalid(v *validate.Errors, field, msg string) (any, bool) {
	v.Add(field, validate.InvalidValue, msg)
	return nil, false
}

// str checks a value of a string type: the normalised value (nil for
// none: text that trims to nothing, or text the validate rules refused
// into v), or the problem of a value that breaks its type's rule.
func str(v *validate.Errors, field string, d Definition, s string) (any, string) {
	var t *string
	switch d.Type {
	case Text:
		t = v.Text(field, &s, MaxText)
	case Email:
		t = v.Email(field, &s)
	case URL:
		t = v.Text(field, &s, MaxURL)
		if t != nil && !validURL(*t) {
			return nil, "must be an absolute http or https URL"
		}
	default:
		t = v.Text(field, &s, 255)
	}
	if t == nil {
		return nil, ""
	}
	switch d.Type {
	case Date:
		if len(*t) != len("2006-01-02") {
			return nil, "must be a date as YYYY-MM-DD"
		}
		if _, err := time.Parse(time.DateOnly, *t); err != nil {
			return nil, "must be a date as YYYY-MM-DD"
		}
	case DateTime:
		at, err := time.Parse(time.RFC3339Nano, *t)
		if err != nil {
			return nil, "must be a date and time in RFC 3339, such as 2026-05-01T09:30:00Z"
		}
		var buf [64]byte
		if b := at.UTC().AppendFormat(buf[:0], time.RFC3339Nano); string(b) != *t {
			return string(b), ""
		}
		return *t, "" // already as answered: no copy
	case Select:
		if _, ok := d.Option(*t); !ok {
			return nil, "must be one of " + optionList(d)
		}
	}
	return *t, ""
}

// optionList names a field's option values for a message.
func optionList(d Definition) string {
	vals := make([]string, len(d.Options))
	for i, o := range d.Options {
		vals[i] = o.Value
	}
	if len(vals) > 10 {
		vals = append(vals[:10], "…")
	}
	return strings.Join(vals, ", ")
}

// validURL reports whether s is an absolute http or https URL with a host.
func validURL(s string) bool {
	if strings.ContainsAny(s, " \t") {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Opaque == ""
}

// digits counts the significant digits of f's shortest decimal form.
func digits(f float64) int {
	s := strconv.FormatFloat(math.Abs(f), 'e', -1, 64)
	mant, _, _ := strings.Cut(s, "e")
	return len(strings.Replace(mant, ".", "", 1))
}

// FormatNumber spells f as JSON numbers are answered (encoding/json's and
// protojson's form): at most 15 significant digits read back exactly.
func FormatNumber(f float64) string {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(nil, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return string(b)
}

// Answer renders stored values for an answer: only the keys of live
// definitions (a deleted field's values leave every answer at once), or
// every key when live is nil; nil when none is left. Stored values that do not decode are left out rather
// than failing the read.
func Answer(live map[string]Definition, stored []byte) map[string]*structpb.Value {
	if len(stored) == 0 {
		return nil
	}
	vals, err := Decode(stored)
	if err != nil {
		return nil
	}
	var out map[string]*structpb.Value
	for k, val := range vals {
		if _, ok := live[k]; !ok && live != nil {
			continue
		}
		pv, ok := toProto(val)
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[string]*structpb.Value, len(vals))
		}
		out[k] = pv
	}
	return out
}

// AnswerChecked is what [Answer] makes of vals once stored, made without
// storing and decoding them: the answer of a create, whose values were
// just checked from sent ([Checker.Create]) and written as vals.Encode().
// A sent value the check kept as it was is answered with the very
// google.protobuf.Value sent; the others (trimmed text, a lower-cased
// email, a datetime in UTC, options in their order) are made anew.
// TestAnswerCheckedIsTheStoredAnswer holds it to Answer.
func AnswerChecked(vals Values, sent map[string]*structpb.Value) map[string]*structpb.Value {
	if len(vals) == 0 {
		return nil
	}
	out := make(map[string]*structpb.Value, len(vals))
	for k, val := range vals {
		if pv := sent[k]; kept(val, pv) {
			out[k] = pv
			continue
		}
		if pv, ok := toProto(val); ok {
			out[k] = pv
		}
	}
	return out
}

// kept reports whether the checked value val answers as sent pv does.
// -0 does not: the database stores numbers as numeric, which has no
// negative zero.
func kept(val any, pv *structpb.Value) bool {
	switch x := val.(type) {
	case string:
		return isString(pv) && pv.GetStringValue() == x
	case bool:
		b, ok := pv.GetKind().(*structpb.Value_BoolValue)
		return ok && b.BoolValue == x
	case json.Number:
		n, ok := pv.GetKind().(*structpb.Value_NumberValue)
		if !ok || n.NumberValue == 0 {
			return false
		}
		f, err := x.Float64()
		return err == nil && f == n.NumberValue
	case []string:
		l, ok := pv.GetKind().(*structpb.Value_ListValue)
		if !ok || len(l.ListValue.GetValues()) != len(x) {
			return false
		}
		for i, it := range l.ListValue.GetValues() {
			if !isString(it) || it.GetStringValue() != x[i] {
				return false
			}
		}
		return true
	}
	return false
}

func isString(pv *structpb.Value) bool {
	_, ok := pv.GetKind().(*structpb.Value_StringValue)
	return ok
}

// toProto is a stored value as a google.protobuf.Value.
func toProto(val any) (*structpb.Value, bool) {
	switch x := val.(type) {
	case string:
		return structpb.NewStringValue(x), true
	case bool:
		return structpb.NewBoolValue(x), true
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, false
		}
		return structpb.NewNumberValue(f), true
	case []any:
		l := make([]*structpb.Value, 0, len(x))
		for _, it := range x {
			pv, ok := toProto(it)
			if !ok {
				return nil, false
			}
			l = append(l, pv)
		}
		return structpb.NewListValue(&structpb.ListValue{Values: l}), true
	case []string:
		l := make([]*structpb.Value, len(x))
		for i, s := range x {
			l[i] = structpb.NewStringValue(s)
		}
		return structpb.NewListValue(&structpb.ListValue{Values: l}), true
	}
	return nil, false
}

// Changed lists the keys whose values differ between a and b, sorted.
func Changed(a, b Values) []string {
	var out []string
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !sameValue(av, bv) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// sameValue compares two stored values: numbers by value (PostgreSQL
// may spell a stored number otherwise), lists element by element.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, ex := x.Float64()
		fy, ey := y.Float64()
		return ex == nil && ey == nil && fx == fy
	case []string:
		return sameValue(anyList(x), b)
	case []any:
		var ys []any
		switch y := b.(type) {
		case []any:
			ys = y
		case []string:
			ys = anyList(y)
		default:
			return false
		}
		return slices.EqualFunc(x, ys, sameValue)
	}
	if _, ok := b.([]string); ok {
		return false
	}
	return a == b
}

func anyList(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// PatchPaths reads an update's custom field paths: whole when it names
// custom_fields (merge the sent map per key; an empty one clears all),
// and the keys it names as custom_fields.<key>, sorted.
func PatchPaths(paths map[string]bool) (whole bool, keys []string) {
	for p := range paths {
		if k, ok := strings.CutPrefix(p, "custom_fields."); ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return paths["custom_fields"], keys
}
