package customfield

import (
	"context"
	"encoding/json"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/records/validate"
)

// This file parses a list's customFields.<key> filters (product.md,
// "Lists"): customFields.<key>=<value>, an exact match of the value
// parsed as the field's type (a multiselect field: the records holding
// that option), and customFields.<key>.gte= and .lte= for number, date
// and datetime fields. Over Connect they are the list request's
// custom_fields map, whose keys are what follows "customFields." in the
// query string: "budget", "budget.gte".

// FilterParam is the prefix of the filters' query parameters.
const FilterParam = "customFields"

// MaxFilters bounds the filters of one list request: every input is
// bounded, and no list needs more than a few.
const MaxFilters = 20

// The filters' suffixes.
const (
	gteSuffix = ".gte"
	lteSuffix = ".lte"
)

// Filter is a list's parsed custom field filters, as the list queries
// take them.
type Filter struct {
	// Eq is the JSON object a record's custom_fields must contain: each
	// equality filter's value as it is stored. nil when there is none.
	Eq []byte
	// RangeKeys, RangeTypes, RangeGte and RangeLte are the bounds (".gte",
	// ".lte"; and a datetime's equality, which compares instants) as
	// parallel arrays, one element a key; "" is no bound. Never nil: an
	// empty list is no bound at all.
	RangeKeys, RangeTypes, RangeGte, RangeLte []string
	// Bound is the canonical rendering of the filters, for the cursor:
	// parameter names with the values as parsed.
	Bound url.Values
}

// Empty reports whether f filters nothing.
func (f Filter) Empty() bool { return f.Eq == nil && len(f.RangeKeys) == 0 }

// ParseFilters parses the filters of a list of records whose live
// definitions are defs. raw maps what follows "customFields." to the
// value ("budget" → "100", "budget.gte" → "10"). An unknown key, an
// operator the type does not have, and a value that does not parse are
// 400s naming the parameter as sent.
func ParseFilters(defs []Definition, raw map[string]string) (Filter, error) {
	f := Filter{RangeKeys: []string{}, RangeTypes: []string{}, RangeGte: []string{}, RangeLte: []string{}, Bound: url.Values{}}
	if len(raw) == 0 {
		return f, nil
	}
	if len(raw) > MaxFilters {
		return f, listing.Invalid(FilterParam, "at most "+strconv.Itoa(MaxFilters)+" custom field filters are accepted")
	}
	byKey := ByKey(defs)
	eq := map[string]any{}
	type bounds struct{ gte, lte string }
	ranges := map[string]*bounds{}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		param := FilterParam + "." + name
		key, op := name, ""
		if k, ok := strings.CutSuffix(name, gteSuffix); ok {
			key, op = k, gteSuffix
		} else if k, ok := strings.CutSuffix(name, lteSuffix); ok {
			key, op = k, lteSuffix
		}
		d, ok := byKey[key]
		if !ok {
			return f, listing.Invalid(param, "is not a custom field of this object: "+strconv.Quote(key)+" is not defined")
		}
		if op != "" && !d.Type.Ordered() {
			return f, listing.Invalid(param, key+" is a "+string(d.Type)+" field; .gte and .lte apply to number, date and datetime fields")
		}
		v, canonical, err := parseValue(d, strings.TrimSpace(raw[name]))
		if err != "" {
			return f, listing.Invalid(param, err)
		}
		f.Bound.Set(param, canonical)
		switch {
		case op == "" && d.Type == DateTime:
			// Equal instants may be spelt apart ("…:00Z", "…:00.000Z"):
			// compared as instants, as the bounds are.
			ranges[key] = &bounds{gte: canonical, lte: canonical}
		case op == "":
			eq[key] = v
		default:
			b := ranges[key]
			if b == nil {
				b = &bounds{}
				ranges[key] = b
			}
			if op == gteSuffix {
				b.gte = canonical
			} else {
				b.lte = canonical
			}
		}
	}
	if len(eq) > 0 {
		b, err := json.Marshal(eq)
		if err != nil {
			return f, err
		}
		f.Eq = b
	}
	keys := make([]string, 0, len(ranges))
	for k := range ranges {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f.RangeKeys = append(f.RangeKeys, k)
		f.RangeTypes = append(f.RangeTypes, string(byKey[k].Type))
		f.RangeGte = append(f.RangeGte, ranges[k].gte)
		f.RangeLte = append(f.RangeLte, ranges[k].lte)
	}
	return f, nil
}

// jsonNumber is a JSON number, the spelling a number filter takes.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// maxFilterNumber bounds the spelling of a number filter: a value has at
// most 15 significant digits.
const maxFilterNumber = 40

// parseValue parses a filter value s as a value of d: what the record's
// custom_fields holds for it when it matches, and the value's canonical
// spelling. A value that does not parse gives a message.
func parseValue(d Definition, s string) (value any, canonical string, problem string) {
	if s == "" {
		return nil, "", "must not be blank"
	}
	if !validate.CleanText(s) {
		return nil, "", validate.CleanTextMessage
	}
	switch d.Type {
	case Text:
		var v validate.Errors
		t := v.Text("value", &s, 1000)
		if v.Err() != nil {
			return nil, "", "must be text of at most 1000 characters without control or invisible characters"
		}
		return *t, *t, ""
	case Number:
		if len(s) > maxFilterNumber || !jsonNumber.MatchString(s) {
			return nil, "", "must be a number such as 1500 or 12.5"
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(x, 0) {
			return nil, "", "must be a finite number"
		}
		// Matched as the number it is (jsonb compares numbers by value);
		// bound to the cursor in one spelling (a value has at most 15
		// significant digits, which a float64 holds).
		return json.Number(s), strconv.FormatFloat(x, 'g', -1, 64), ""
	case Boolean:
		switch s {
		case "true":
			return true, s, ""
		case "false":
			return false, s, ""
		}
		return nil, "", "must be true or false"
	case Date:
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return nil, "", "must be a date such as 2026-01-31"
		}
		return s, s, ""
	case DateTime:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, "", "must be an RFC 3339 time such as 2026-01-31T09:00:00Z"
		}
		c := t.UTC().Format(time.RFC3339Nano)
		return c, c, ""
	case Select, MultiSelect:
		if _, ok := d.Option(s); !ok {
			return nil, "", "must be one of the options of " + d.Key
		}
		if d.Type == MultiSelect {
			return []string{s}, s, ""
		}
		return s, s, ""
	case URL:
		u, err := url.Parse(s)
		if err != nil || len(s) > 2048 || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, "", "must be an absolute http or https URL"
		}
		return s, s, ""
	case Email:
		var v validate.Errors
		e := v.Email("value", &s)
		if v.Err() != nil || e == nil {
			return nil, "", "must be an email address such as name@example.com"
		}
		return *e, *e, ""
	}
	return nil, "", "cannot be filtered on"
}

// Filters parses the custom field filters of a list of object's records
// in workspace against its live definitions (read only when there are
// filters: most lists have none).
func Filters(ctx context.Context, q db.DBTX, workspace uuid.UUID, object Object, raw map[string]string) (Filter, error) {
	if len(raw) == 0 {
		return ParseFilters(nil, raw)
	}
	defs, err := Live(ctx, q, workspace, object)
	if err != nil {
		return Filter{}, err
	}
	return ParseFilters(defs, raw)
}

// Bind adds the filters to those a list's cursor is bound to.
func (f Filter) Bind(filters url.Values) {
	for k, v := range f.Bound {
		filters[k] = v
	}
}
