// Package partnerapi is the Go client of the Partner Workspace API: the
// generated Connect clients of its public services (under gen/: token,
// identity, contact and lead; Connect, gRPC and gRPC-Web), an interceptor
// that authenticates every call with a client-credentials token, and
// Pages, which walks a list to its end.
//
// It is a module of its own, so that a Go service depends on this package
// and the API's protos, not on the server.
package partnerapi

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svat/partnerapi/clients/go/gen/partner/token/v1/tokenv1connect"
)

// Options configure [ClientCredentials].
type Options struct {
	// BaseURL is the API's base URL, e.g. "https://partner-api.example.com";
	// the token endpoint is BaseURL + "/api/oauth/token".
	BaseURL string
	// ClientID ("cli_…") and ClientSecret are the API client's credentials.
	// Keep the secret on a trusted backend.
	ClientID, ClientSecret string
	// Scopes to ask for; none: every scope of the client.
	Scopes []string
	// HTTPClient reaches the token endpoint. Default http.DefaultClient.
	HTTPClient *http.Client
	// ExpiryMargin renews a token this long before it expires (at most
	// half its lifetime). Default 60 s.
	ExpiryMargin time.Duration
	// Retries is how many times a unary call answered 429
	// (ResourceExhausted) or 503 (Unavailable) is sent again, after the
	// wait the answer asks for (Retry-After, or google.rpc.RetryInfo).
	// Default 3; negative: none. Send creates with an Idempotency-Key, so
	// that a retry of one whose outcome was unknown cannot create twice.
	Retries int
	// MaxWait bounds one wait before a retry. Default 30 s.
	MaxWait time.Duration
}

// ClientCredentials returns a Connect interceptor that authenticates
// every call with an access token from the OAuth 2.0 client credentials
// grant (RFC 6749 §4.4, HTTP Basic, through golang.org/x/oauth2).
//
// The token is fetched on first use, shared by concurrent calls, cached
// until shortly before it expires, and fetched again when a call answers
// Unauthenticated (revoked, or the secret was rotated): a unary call is
// then sent once more with the new token. Unary calls answered 429 or 503
// are retried as [Options.Retries] says. Calls to the TokenService pass
// through untouched.
func ClientCredentials(o Options) connect.Interceptor {
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	if o.ExpiryMargin == 0 {
		o.ExpiryMargin = time.Minute
	}
	if o.Retries == 0 {
		o.Retries = 3
	}
	if o.MaxWait == 0 {
		o.MaxWait = 30 * time.Second
	}
	return &credentials{o: o, cfg: clientcredentials.Config{
		ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes,
		TokenURL:  strings.TrimSuffix(o.BaseURL, "/") + "/api/oauth/token",
		AuthStyle: oauth2.AuthStyleInHeader,
	}}
}

type credentials struct {
	o   Options
	cfg clientcredentials.Config

	mu      sync.Mutex
	token   string
	renewAt time.Time
}

// bearer returns a token: the cached one unless it is stale (the one a
// call was just refused with) or due for renewal.
func (c *credentials) bearer(ctx context.Context, stale string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock() // one fetch at a time; the others wait for it
	if c.token != "" && c.token != stale && time.Now().Before(c.renewAt) {
		return c.token, nil
	}
	t, err := c.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, c.o.HTTPClient))
	if err != nil {
		return "", connect.NewError(tokenCode(err), fmt.Errorf("get access token: %w", err))
	}
	life := time.Until(t.Expiry)
	if t.Expiry.IsZero() {
		life = time.Hour
	}
	c.token, c.renewAt = t.AccessToken, time.Now().Add(life-min(c.o.ExpiryMargin, life/2))
	return c.token, nil
}

// tokenCode maps a token endpoint failure to a Connect code.
func tokenCode(err error) connect.Code {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		switch s := re.Response.StatusCode; {
		case s == http.StatusUnauthorized:
			return connect.CodeUnauthenticated
		case s == http.StatusTooManyRequests:
			return connect.CodeResourceExhausted
		case s >= 500:
			return connect.CodeUnavailable
		}
		return connect.CodeInvalidArgument
	}
	return connect.CodeUnavailable
}

func (c *credentials) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if strings.HasPrefix(req.Spec().Procedure, "/"+tokenv1connect.TokenServiceName+"/") {
			return next(ctx, req)
		}
		var stale string
		refreshed := false
		for attempt := 0; ; attempt++ {
			tok, err := c.bearer(ctx, stale)
			if err != nil {
				return nil, err
			}
			req.Header().Set("Authorization", "Bearer "+tok)
			res, err := next(ctx, req)
			code := connect.CodeOf(err)
			switch {
			case err == nil:
				return res, nil
			case code == connect.CodeUnauthenticated && !refreshed:
				refreshed, stale = true, tok
				attempt-- // a new token is not a retry
				continue
			case (code == connect.CodeResourceExhausted || code == connect.CodeUnavailable) && attempt < c.o.Retries:
				if err := sleep(ctx, c.wait(err, attempt)); err != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		}
	}
}

// wait is how long to wait before retry number attempt+1: what the answer
// asks for, else 0.5 s doubled per attempt, at most MaxWait.
func (c *credentials) wait(err error, attempt int) time.Duration {
	var ce *connect.Error
	if errors.As(err, &ce) {
		for _, d := range ce.Details() {
			if v, derr := d.Value(); derr == nil {
				if ri, ok := v.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
					return min(ri.GetRetryDelay().AsDuration(), c.o.MaxWait)
				}
			}
		}
		if s := ce.Meta().Get("Retry-After"); s != "" {
			if n, perr := strconv.Atoi(s); perr == nil && n >= 0 {
				return min(time.Duration(n)*time.Second, c.o.MaxWait)
			}
		}
	}
	return min(500*time.Millisecond<<attempt, c.o.MaxWait)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *credentials) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if tok, err := c.bearer(ctx, ""); err == nil {
			conn.RequestHeader().Set("Authorization", "Bearer "+tok)
		}
		return conn
	}
}

func (c *credentials) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// Pages calls a list RPC (ListContacts, ListLeads) page after page,
// following pagination.next_cursor, and yields every item of every page
// once, then stops; an error is yielded once, last. Item is the list's
// element type (*contactv1.Contact): the one repeated message field of
// the response. req is not changed; each page's request is a copy with
// its cursor set.
//
//	for c, err := range partnerapi.Pages[*contactv1.Contact](ctx, contacts.ListContacts, &contactv1.ListContactsRequest{}) {
func Pages[Item proto.Message, Req, Res any](ctx context.Context, call func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), req *Req) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		var zero Item
		msg, ok := any(req).(proto.Message)
		if !ok {
			yield(zero, errors.New("pages: the request is not a protobuf message"))
			return
		}
		page := proto.Clone(msg)
		cursor := page.ProtoReflect().Descriptor().Fields().ByName("cursor")
		if cursor == nil || cursor.Kind() != protoreflect.StringKind {
			yield(zero, fmt.Errorf("pages: %s has no cursor field", page.ProtoReflect().Descriptor().FullName()))
			return
		}
		for {
			res, err := call(ctx, connect.NewRequest(any(page).(*Req)))
			if err != nil {
				yield(zero, err)
				return
			}
			out := any(res.Msg).(proto.Message).ProtoReflect()
			items, next, err := pageOf(out)
			if err != nil {
				yield(zero, err)
				return
			}
			for i := range items.Len() {
				item, ok := items.Get(i).Message().Interface().(Item)
				if !ok {
					yield(zero, fmt.Errorf("pages: the items are %s, not the type asked for", items.Get(i).Message().Descriptor().FullName()))
					return
				}
				if !yield(item, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			page.ProtoReflect().Set(cursor, protoreflect.ValueOfString(next))
		}
	}
}

// pageOf finds a list response's items (its one repeated message field)
// and its pagination.next_cursor.
func pageOf(m protoreflect.Message) (protoreflect.List, string, error) {
	var items protoreflect.List
	var next string
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		switch {
		case f.IsList() && f.Kind() == protoreflect.MessageKind:
			if items != nil {
				return nil, "", fmt.Errorf("pages: %s has more than one list", m.Descriptor().FullName())
			}
			items = m.Get(f).List()
		case f.Name() == "pagination" && f.Kind() == protoreflect.MessageKind:
			p := m.Get(f).Message()
			if nc := p.Descriptor().Fields().ByName("next_cursor"); nc != nil {
				next = p.Get(nc).String()
			}
		}
	}
	if items == nil {
		return nil, "", fmt.Errorf("pages: %s is not a list response", m.Descriptor().FullName())
	}
	return items, next, nil
}
