package restgw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// errParam is a malformed parameter set; its text is shown to the caller.
type errParam struct{ msg string }

func (e errParam) Error() string { return e.msg }

func paramErr(format string, args ...any) error { return errParam{fmt.Sprintf(format, args...)} }

// mediaType returns the media type of a Content-Type header, refusing a
// charset other than UTF-8.
func mediaType(contentType string) (string, error) {
	if contentType == "" {
		return "", nil
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "", paramErr("malformed Content-Type %q", contentType)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "", paramErr("charset %q is not supported; send UTF-8", cs)
	}
	return mt, nil
}

// DecodeOAuthBody reads the parameters of a token or revocation request
// straight into its request message, whose fields are all strings,
// named as the parameters. The body is application/x-www-form-urlencoded
// (RFC 6749 §3.2) or a flat JSON object of strings. A repeated parameter
// is an error (§3.1); parameters without a value (empty, or null in JSON)
// count as omitted (§3.1); parameters the message does not name are
// ignored (§3.2). An empty body with no Content-Type is an empty form.
// Invalid UTF-8 in a form value becomes U+FFFD, byte by byte, as it does
// in JSON, so both forms of a body read alike.
func DecodeOAuthBody(contentType string, body []byte, msg protoreflect.Message) error {
	mt, err := mediaType(contentType)
	if err != nil {
		return err
	}
	fields := msg.Descriptor().Fields()
	set := func(k, v string) {
		if v == "" {
			return
		}
		f := fields.ByName(protoreflect.Name(k))
		if f == nil {
			f = fields.ByJSONName(k)
		}
		if f != nil && f.Kind() == protoreflect.StringKind && !f.IsList() {
			msg.Set(f, protoreflect.ValueOfString(v))
		}
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return paramErr("malformed form body")
		}
		for k, v := range vals {
			if len(v) > 1 {
				return paramErr("parameter %q is repeated", k)
			}
		}
		for k, v := range vals {
			set(k, validUTF8(v[0]))
		}
	case "application/json":
		vals, err := flatJSON(body)
		if err != nil {
			return err
		}
		for k, v := range vals {
			set(k, v)
		}
	case "":
		if len(bytes.TrimSpace(body)) != 0 {
			return paramErr("send Content-Type: application/x-www-form-urlencoded or application/json")
		}
	default:
		return paramErr("Content-Type %q is not supported; send application/x-www-form-urlencoded or application/json", mt)
	}
	return nil
}

// validUTF8 replaces each byte of s that is not part of valid UTF-8 with
// U+FFFD, as encoding/json does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

// flatJSON decodes a JSON object whose values are all strings or null
// (read as the empty string: not sent), refusing duplicate keys, which
// encoding/json would silently merge.
func flatJSON(body []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	malformed := paramErr("malformed JSON body: want an object of string parameters")
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, malformed
	}
	out := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed
		}
		key, ok := tok.(string)
		if !ok {
			return nil, malformed
		}
		if _, dup := out[key]; dup {
			return nil, paramErr("parameter %q is repeated", key)
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, malformed
		}
		val, ok := tok.(string)
		if !ok && tok != nil { // null is "not sent", as an empty string is
			return nil, paramErr("parameter %q must be a string", key)
		}
		out[key] = val
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, malformed
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, malformed
	}
	return out, nil
}
