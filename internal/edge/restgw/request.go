package restgw

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/edge/jsoncodec"
	"github.com/svat/partnerapi/internal/edge/reqbody"
	"github.com/svat/partnerapi/internal/records/fieldmask"
	"github.com/svat/partnerapi/internal/records/validate"
)

// This file builds a route's request message from the path, the query
// string and the body, as the google.api.http rules say: path variables
// set their fields, the query string the fields the rule leaves to it,
// and the body its field or the whole request, parsed strictly (an
// unknown field is a 400; the Connect codec, for RPC clients, ignores
// them, and so does a Google gateway's whole-request body). [Gateway.prepare] refuses what cannot be used before anything is
// parsed; [route.fill] sets the fields.

// prepared is what prepare read: the body, bounded and inflated, and the
// update mask a merge patch sends.
type prepared struct {
	body []byte
	// mask is the update mask derived from a merge patch, "" for none.
	mask string
	// empty is set for a merge patch that changes nothing.
	empty bool
}

// prepare checks the path variables and the query string and reads the
// body.
func (g *Gateway) prepare(r *http.Request, rt *route, oauth bool) (prepared, *apierror.Error) {
	invalid := func(msg string) *apierror.Error {
		if oauth {
			return apierror.New(apierror.CodeInvalidRequest, msg)
		}
		return apierror.Malformed(msg)
	}
	for _, v := range rt.vars {
		// PostgreSQL text holds neither NUL nor invalid UTF-8, and
		// protobuf strings no invalid UTF-8: the caller's 400, named.
		if !validate.CleanText(r.PathValue(v.name)) {
			name := string(v.field.Name())
			e := apierror.Malformed(name + ": " + validate.CleanTextMessage)
			e.Fields = []apierror.FieldViolation{{Field: name, Code: validate.InvalidFormat, Message: validate.CleanTextMessage}}
			return prepared{}, e
		}
	}
	if r.URL.RawQuery != "" {
		if e := g.checkQuery(r, rt, oauth, invalid); e != nil {
			return prepared{}, e
		}
	}
	return g.prepareBody(r, rt, oauth, invalid)
}

// checkQuery refuses a query string the route does not take: a parameter
// the rule leaves to no field, one given twice (or under both its
// spellings, externalId and external_id: which value won would depend on
// map order), or a value its field cannot hold. A Partner route takes
// query parameters on a GET or a DELETE (which has no body) only.
func (g *Gateway) checkQuery(r *http.Request, rt *route, oauth bool, invalid func(string) *apierror.Error) *apierror.Error {
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return invalid("the query string is malformed")
	}
	if g.Dialect == Partner && rt.Method != http.MethodGet && rt.Method != http.MethodDelete {
		return invalid("query parameters are not accepted here; send them in the body")
	}
	keys := make([]string, 0, len(query))
	for k := range query {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := query[k]
		f, sub := field(rt.input, k), ""
		if !rt.params[k] {
			if f, sub = mapParam(rt, k); f == nil {
				return invalid("unknown query parameter " + strconv.Quote(k))
			}
			if !validate.CleanText(sub) {
				return invalid("query parameter " + strconv.Quote(k) + ": " + validate.CleanTextMessage)
			}
		} else if stringMap(f) {
			return invalid("query parameter " + strconv.Quote(k) + " takes a key: send " + k + ".KEY=VALUE")
		}
		other := ""
		if string(f.Name()) != f.JSONName() {
			other = f.JSONName()
			if k == other || strings.HasPrefix(k, other+".") {
				other = string(f.Name())
			}
			if sub != "" {
				other += "." + sub
			}
		}
		if len(v) > 1 {
			return invalid("query parameter " + strconv.Quote(k) + " is repeated")
		}
		if other != "" && query.Has(other) {
			return invalid("query parameter " + strconv.Quote(k) + " is repeated (also sent as " + strconv.Quote(other) + ")")
		}
		if msg := badQueryValue(f, v[0]); msg != "" {
			e := invalid(k + ": " + msg)
			e.Fields = []apierror.FieldViolation{{Field: k, Code: validate.InvalidFormat, Message: msg}}
			return e
		}
	}
	return nil
}

// field is the field of a query parameter, by JSON or proto name.
func field(input protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	if f := input.Fields().ByJSONName(name); f != nil {
		return f
	}
	return input.Fields().ByName(protoreflect.Name(name))
}

// mapParam returns the map field a query parameter NAME.KEY sets, and
// KEY: a map<string, string> field of the request takes its entries as
// parameters named after it, a dot and the entry's key
// (customFields.budget=1500). nil when k is no such parameter.
func mapParam(rt *route, k string) (protoreflect.FieldDescriptor, string) {
	name, sub, ok := strings.Cut(k, ".")
	if !ok || sub == "" || !rt.params[name] {
		return nil, ""
	}
	if f := field(rt.input, name); f != nil && stringMap(f) {
		return f, sub
	}
	return nil, ""
}

// stringMap reports whether f is a map<string, string>.
func stringMap(f protoreflect.FieldDescriptor) bool {
	return f.IsMap() && f.MapKey().Kind() == protoreflect.StringKind && f.MapValue().Kind() == protoreflect.StringKind
}

// queryField reports whether a query parameter can set field f: a
// singular scalar, a field mask in its JSON form, or a map<string,
// string>, whose entries are parameters of their own (mapParam).
func queryField(f protoreflect.FieldDescriptor) bool {
	if stringMap(f) {
		return true
	}
	if f.IsList() || f.IsMap() {
		return false
	}
	switch f.Kind() {
	case protoreflect.StringKind, protoreflect.BoolKind,
		protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	case protoreflect.MessageKind:
		return f.Message().FullName() == "google.protobuf.FieldMask"
	}
	return false
}

// badQueryValue says what is wrong with the value of a query parameter of
// field f, or "": text must be valid UTF-8 without NUL (PostgreSQL text
// holds neither), numbers must parse. Go's parser's own message is not
// the caller's business.
func badQueryValue(f protoreflect.FieldDescriptor, v string) string {
	if !validate.CleanText(v) {
		return validate.CleanTextMessage
	}
	var err error
	switch f.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		_, err = strconv.ParseInt(v, 10, 32)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		_, err = strconv.ParseInt(v, 10, 64)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		_, err = strconv.ParseUint(v, 10, 32)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		_, err = strconv.ParseUint(v, 10, 64)
	case protoreflect.BoolKind:
		_, err = strconv.ParseBool(v)
	default:
		return ""
	}
	if err != nil {
		if f.Kind() == protoreflect.BoolKind {
			return "must be true or false"
		}
		return "must be an integer"
	}
	return ""
}

// prepareBody caps, inflates and checks the body of a POST or PATCH.
func (g *Gateway) prepareBody(r *http.Request, rt *route, oauth bool, invalid func(string) *apierror.Error) (prepared, *apierror.Error) {
	var p prepared
	if r.Body == nil || r.Method == http.MethodGet {
		return p, nil
	}
	// Bounded on the wire and once inflated.
	body, e := reqbody.Read(r)
	if e != nil {
		return p, e
	}
	p.body = body
	if oauth {
		// The parameters are checked as they are read (fill).
		return p, nil
	}
	if len(body) == 0 && (rt.body == nil || rt.whole) && g.Dialect == Partner {
		// No body where none is needed (a DELETE, an action such as
		// POST …/test whose request has only path members) needs no
		// Content-Type: the request is empty, as {} would make it.
		return p, nil
	}
	mt, err := mediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return p, apierror.New(apierror.CodeUnsupportedMedia, err.Error())
	}
	if mt == "" && g.Dialect == Google {
		mt = "application/json"
	}
	// A PATCH body is a JSON merge patch (RFC 7396), under its own
	// media type or as plain JSON.
	if mt != "application/json" && !(mt == "application/merge-patch+json" && r.Method == http.MethodPatch) {
		if r.Method == http.MethodPatch {
			return p, apierror.New(apierror.CodeUnsupportedMedia, "send Content-Type: application/merge-patch+json or application/json")
		}
		return p, apierror.New(apierror.CodeUnsupportedMedia, "send Content-Type: application/json")
	}
	if rt.patch != nil {
		// RFC 7396 over AIP-134: the members the patch sends, null
		// included, are the update mask, so that null clears and an absent
		// member keeps (protojson alone cannot tell null from absent).
		var patch map[string]any
		if err := json.Unmarshal(body, &patch); err != nil || patch == nil {
			return p, invalid("the body must be a JSON merge patch: a JSON object of the fields to change")
		}
		if p.mask = fieldmask.FromJSON(rt.patch, patch); p.mask == "" && fieldmask.MergesNothing(rt.patch, patch) {
			// Nothing to change ({} or only empty objects such as
			// {"value":{}}, which merge nothing): without a mask the
			// handler would update the populated fields, replacing a
			// value with an empty one.
			p.empty = true
		}
	}
	return p, nil
}

// fill sets the request's fields from the body, the path and the query
// string, in that order (a path variable wins over the same field in the
// body). The query string has passed checkQuery.
func (rt *route) fill(msg protoreflect.Message, r *http.Request, p prepared, d Dialect) *apierror.Error {
	switch {
	case rt.OAuth():
		if err := DecodeOAuthBody(r.Header.Get("Content-Type"), p.body, msg); err != nil {
			return apierror.New(apierror.CodeInvalidRequest, err.Error())
		}
	case p.empty:
		msg.Mutable(rt.body)
	case len(p.body) == 0:
		// No body is an empty message, as {} would make it.
	case rt.body != nil:
		if e := jsoncodec.UnmarshalStrict(p.body, msg.Mutable(rt.body).Message().Interface()); e != nil {
			return e
		}
	case rt.whole:
		// As the RPC's own JSON codec reads it, strictly.
		if e := jsoncodec.UnmarshalStrict(p.body, msg.Interface()); e != nil {
			return e
		}
	}
	for _, v := range rt.vars {
		msg.Set(v.field, protoreflect.ValueOfString(r.PathValue(v.name)))
	}
	if p.mask != "" {
		if e := setParam(msg, msg.Descriptor().Fields().ByName("update_mask"), p.mask); e != nil {
			return e
		}
	}
	if r.URL.RawQuery == "" {
		return nil
	}
	for k, vs := range r.URL.Query() {
		f := field(rt.input, k)
		if f == nil || !rt.params[k] {
			mf, sub := mapParam(rt, k)
			for _, v := range vs {
				msg.Mutable(mf).Map().Set(protoreflect.ValueOfString(sub).MapKey(), protoreflect.ValueOfString(v))
			}
			continue
		}
		for _, v := range vs {
			if e := setParam(msg, f, v); e != nil {
				return e
			}
		}
	}
	return nil
}

// setParam sets one query parameter as JSON reads it (a field mask in
// its JSON form). A value checkQuery let through but JSON refuses
// ("True") is malformed, in words of ours.
func setParam(msg protoreflect.Message, f protoreflect.FieldDescriptor, v string) *apierror.Error {
	var val protoreflect.Value
	var err error
	switch f.Kind() {
	case protoreflect.StringKind:
		val = protoreflect.ValueOfString(v)
	case protoreflect.BoolKind:
		var b bool
		err = json.Unmarshal([]byte(v), &b)
		val = protoreflect.ValueOfBool(b)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		var x int64
		x, err = strconv.ParseInt(v, 10, 32)
		val = protoreflect.ValueOfInt32(int32(x))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		var x int64
		x, err = strconv.ParseInt(v, 10, 64)
		val = protoreflect.ValueOfInt64(x)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		var x uint64
		x, err = strconv.ParseUint(v, 10, 32)
		val = protoreflect.ValueOfUint32(uint32(x))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		var x uint64
		x, err = strconv.ParseUint(v, 10, 64)
		val = protoreflect.ValueOfUint64(x)
	case protoreflect.MessageKind:
		val = msg.NewField(f)
		q, _ := json.Marshal(v)
		err = protojson.Unmarshal(q, val.Message().Interface())
	}
	if err != nil {
		return apierror.Malformed("the request is malformed")
	}
	msg.Set(f, val)
	return nil
}
