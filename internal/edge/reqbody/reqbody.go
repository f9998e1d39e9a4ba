// Package reqbody bounds request bodies on every path of both listeners:
// at most [MaxBytes] on the wire and at most [MaxBytes] once inflated.
//
// A gzip body of 1 MiB can inflate to a gigabyte. The RPC framework
// inflates with its own gzip reader, which knows no bound, so every place
// that inflates gets [NewGzipDecompressor] instead (the Connect handlers,
// reflection and health), and whole bodies sent with Content-Encoding
// are inflated by [Read] (the REST gateway) or [Bound] (the RPC paths),
// which stop one byte past the bound. Callers do the cheap checks that can
// refuse a request (credentials, rate limits) before they read a body.
package reqbody

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/svat/partnerapi/internal/contract/apierror"
)

// MaxBytes caps every request body, compressed or inflated.
const MaxBytes = 1 << 20

// wireSlack lets an RPC envelope (5 bytes per message) around a message of
// MaxBytes through Cap; the RPC framework then bounds the message itself.
const wireSlack = 4 << 10

// TooLarge is the 413 of a body over MaxBytes.
func TooLarge() *apierror.Error {
	return apierror.New(apierror.CodePayloadTooLarge, "the request body exceeds 1 MiB")
}

// TooLargeInflated is the 413 of a compressed body that inflates past
// MaxBytes.
func TooLargeInflated() *apierror.Error {
	return apierror.New(apierror.CodePayloadTooLarge, "the request body exceeds 1 MiB once decompressed")
}

func notGzip() *apierror.Error {
	return apierror.Malformed("the request body is not valid gzip data")
}

// Cap wraps every request body in an http.MaxBytesReader, so nothing below
// can read more than MaxBytes (plus envelope slack) off the wire, whatever
// it does with the body.
func Cap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBytes+wireSlack)
		}
		next.ServeHTTP(w, r)
	})
}

// Read reads the whole body of r: at most MaxBytes on the wire, inflated
// (at most MaxBytes again) when Content-Encoding is gzip, and removes
// Content-Encoding. Errors are safe to show: 413, 415, or 400 for a broken
// gzip stream.
func Read(r *http.Request) ([]byte, *apierror.Error) {
	if r.Body == nil {
		return nil, nil
	}
	defer r.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(r.Body, MaxBytes+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || len(raw) > MaxBytes:
		return nil, TooLarge()
	case err != nil:
		return nil, apierror.Malformed("could not read the request body")
	}
	enc := strings.ToLower(strings.TrimSpace(strings.Join(r.Header.Values("Content-Encoding"), ",")))
	r.Header.Del("Content-Encoding")
	switch enc {
	case "", "identity":
		return raw, nil
	case "gzip", "x-gzip":
	default:
		return nil, apierror.New(apierror.CodeUnsupportedMedia, "Content-Encoding "+strconv.Quote(enc)+" is not supported; send gzip or no encoding")
	}
	var out bytes.Buffer
	d := &gzipReader{}
	_ = d.Reset(bytes.NewReader(raw))
	if _, err := out.ReadFrom(d); err != nil {
		if d.cause != nil {
			return nil, d.cause
		}
		return nil, notGzip()
	}
	return out.Bytes(), nil
}

// Bound refuses a body that declares more than MaxBytes (a gRPC body may
// add its envelopes) before anything reads it, replaces a body sent with
// Content-Encoding, or without a length, by its (inflated) bytes through
// Read, so the handlers below never inflate a whole body themselves nor
// meet the wire cap, and checks the framing of a gRPC or gRPC-Web body. It serves unary RPCs only (never a stream,
// which it would buffer). A refusal is written by fail in the request's
// surface.
func Bound(next http.Handler, fail func(http.ResponseWriter, *http.Request, *apierror.Error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		grpc := strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/grpc-web-text")
		limit := int64(MaxBytes)
		if grpc {
			limit += wireSlack
		}
		if r.ContentLength > limit {
			fail(w, r, TooLarge())
			return
		}
		// A body of unknown length (chunked, or HTTP/2 without
		// Content-Length) is read here too: past the wire cap, connect-go
		// would answer ResourceExhausted in its own words, which the
		// Connect protocol sends as 429 ("slow down"), not 413.
		if r.Method == http.MethodGet {
			if e := inflateQuery(r); e != nil {
				fail(w, r, e)
				return
			}
		}
		unknownLength := r.ContentLength < 0 && r.Method != http.MethodGet && r.Method != http.MethodHead
		if r.Header.Get("Content-Encoding") == "" && !grpc && !unknownLength {
			next.ServeHTTP(w, r)
			return
		}
		var body []byte
		var e *apierror.Error
		if grpc {
			body, e = readEnvelope(r)
		} else {
			body, e = Read(r)
		}
		if e != nil {
			fail(w, r, e)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		next.ServeHTTP(w, r)
	})
}

// inflateQuery inflates the message of a Connect GET sent with
// compression=gzip (the Connect protocol carries a GET's message in the
// query) through the same bound as a body, and puts it back uncompressed,
// so connect-go never inflates it: past the bound it would answer
// ResourceExhausted, which Connect sends as 429, where a body gets 413.
func inflateQuery(r *http.Request) *apierror.Error {
	q := r.URL.Query()
	if !q.Has("message") || !strings.EqualFold(q.Get("compression"), "gzip") {
		return nil
	}
	raw := []byte(q.Get("message"))
	b64 := q.Get("base64") == "1"
	if b64 {
		n, err := base64.RawURLEncoding.Decode(raw, bytes.TrimRight(raw, "="))
		if err != nil {
			return apierror.Malformed("the message query parameter is not URL-safe base64")
		}
		raw = raw[:n]
	}
	var out bytes.Buffer
	d := &gzipReader{}
	_ = d.Reset(bytes.NewReader(raw))
	if _, err := out.ReadFrom(d); err != nil {
		if d.cause != nil {
			return d.cause
		}
		return notGzip()
	}
	msg := out.String()
	if b64 {
		msg = base64.RawURLEncoding.EncodeToString(out.Bytes())
	}
	q.Set("message", msg)
	q.Del("compression")
	r.URL.RawQuery = q.Encode()
	return nil
}

// readEnvelope reads a unary gRPC or gRPC-Web request body and checks it
// is exactly one message envelope: a flags byte (0, or 1 for a message
// compressed with the grpc-encoding), a 4-byte length, and that many
// bytes. connect-go calls malformed framing an Internal error, which
// would blame the server for the caller's bytes.
func readEnvelope(r *http.Request) ([]byte, *apierror.Error) {
	defer r.Body.Close()
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBytes+wireSlack+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || len(body) > MaxBytes+wireSlack:
		return nil, TooLarge()
	case err != nil:
		return nil, apierror.Malformed("could not read the request body")
	}
	bad := apierror.Malformed("the request body is not one gRPC message envelope")
	if len(body) < 5 {
		return nil, bad
	}
	flags, size := body[0], binary.BigEndian.Uint32(body[1:5])
	if uint64(size) != uint64(len(body)-5) {
		return nil, bad
	}
	if size > MaxBytes {
		return nil, TooLarge()
	}
	switch enc := r.Header.Get("Grpc-Encoding"); {
	case flags == 0:
	case flags == 1 && enc != "" && enc != "identity":
	default:
		return nil, apierror.Malformed("the gRPC message flags are not valid for its grpc-encoding")
	}
	return body, nil
}

// NewGzipDecompressor returns a gzip reader for connect-go that yields at
// most MaxBytes: reading past them fails with a 413 payload_too_large
// error (a *connect.Error with its ErrorInfo, which connect-go passes on
// unchanged), and a broken stream fails with a 400 that
// says so, never with the gzip package's own words. Reset never fails, so
// connect-go's "get decompressor: …" wrapping never reaches a caller.
func NewGzipDecompressor() connect.Decompressor { return &gzipReader{} }

type gzipReader struct {
	src     io.Reader
	zr      gzip.Reader
	started bool
	n       int64
	err     error
	cause   *apierror.Error
}

func (g *gzipReader) Reset(r io.Reader) error {
	g.src, g.started, g.n, g.err, g.cause = r, false, 0, nil, nil
	return nil
}

func (g *gzipReader) Close() error { return nil }

func (g *gzipReader) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if !g.started {
		g.started = true
		if err := g.zr.Reset(g.src); err != nil {
			return 0, g.fail(notGzip())
		}
	}
	if g.n >= MaxBytes {
		// At the bound: one more byte means the body is too large.
		var one [1]byte
		k, err := io.ReadFull(&g.zr, one[:])
		switch {
		case k > 0:
			return 0, g.fail(TooLargeInflated())
		case errors.Is(err, io.EOF):
			return 0, io.EOF
		default:
			return 0, g.fail(notGzip())
		}
	}
	if rest := MaxBytes - g.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	k, err := g.zr.Read(p)
	g.n += int64(k)
	if err != nil && !errors.Is(err, io.EOF) {
		return k, g.fail(notGzip())
	}
	return k, err
}

// fail remembers e and returns it as a Connect error, so the frameworks
// answer with our code, message and ErrorInfo.
func (g *gzipReader) fail(e *apierror.Error) error {
	g.cause, g.err = e, apierror.ToConnect(e)
	return g.err
}

// Frames checks the message envelopes of a streaming gRPC or gRPC-Web
// request body as they are read: a body that ends inside an envelope, or
// an envelope whose flags do not fit the request's grpc-encoding, fails
// with InvalidArgument. connect-go would call either an Internal error.
func Frames(r *http.Request) io.ReadCloser {
	enc := r.Header.Get("Grpc-Encoding")
	return &frames{ReadCloser: r.Body, compressed: enc != "" && enc != "identity", need: 5, header: true}
}

type frames struct {
	io.ReadCloser
	compressed bool
	header     bool   // reading the 5-byte prefix, else the payload
	need       uint64 // bytes left in the current part
	prefix     [5]byte
	err        error
}

func (f *frames) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.ReadCloser.Read(p)
	for b := p[:n]; len(b) > 0; {
		if f.header {
			f.prefix[5-f.need] = b[0]
			b, f.need = b[1:], f.need-1
			if f.need == 0 {
				if flags := f.prefix[0]; flags > 1 || (flags == 1 && !f.compressed) {
					f.err = apierror.ToConnect(apierror.Malformed("the gRPC message flags are not valid for its grpc-encoding"))
					return 0, f.err
				}
				f.header, f.need = false, uint64(binary.BigEndian.Uint32(f.prefix[1:]))
				if f.need == 0 {
					f.header, f.need = true, 5
				}
			}
			continue
		}
		k := min(uint64(len(b)), f.need)
		b, f.need = b[k:], f.need-k
		if f.need == 0 {
			f.header, f.need = true, 5
		}
	}
	if errors.Is(err, io.EOF) && !(f.header && f.need == 5) {
		f.err = apierror.ToConnect(apierror.Malformed("the request body ends inside a gRPC message envelope"))
		return n, f.err
	}
	return n, err
}
