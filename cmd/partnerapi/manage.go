package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	customfieldv1 "github.com/svat/partnerapi/gen/partner/customfield/v1"
)

// optionalRate is a rate flag that knows whether it was given.
type optionalRate struct{ v *int32 }

func (o *optionalRate) String() string {
	if o.v == nil {
		return ""
	}
	return strconv.Itoa(int(*o.v))
}

func (o *optionalRate) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return fmt.Errorf("want requests per second, 0 or more")
	}
	v := int32(n)
	o.v = &v
	return nil
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// commands are the management commands: their synopsis and the flags
// they use (besides --admin-url and --admin-token), for --help.
var commands = []struct {
	name, synopsis string
	flags          []string
}{
	{"workspace create", "--name NAME", []string{"name"}},
	{"workspace list", "[--limit N] [--page-token T]   (oldest first; nextPageToken names the next page)", []string{"limit", "page-token"}},
	{"member add", "--workspace WS --email E [--settings-access] [--pending]", []string{"workspace", "email", "settings-access", "pending"}},
	{"member list", "--workspace WS [--limit N] [--page-token T]   (oldest first)", []string{"workspace", "limit", "page-token"}},
	{"member update", "--member M --settings-access=true|false   (audited; a member without it can no longer manage clients)", []string{"member", "settings-access"}},
	{"member sign-in-link", "--member M [--ttl D]   (a one-time link to the workspace settings page; give it to the member's browser at once)", []string{"member", "ttl"}},
	{"client create", `--workspace WS --member M --name N --scopes "contacts:read leads:read" [--redirect-uri URI]... [--read-rate N] [--write-rate N]`, []string{"workspace", "member", "name", "scopes", "redirect-uri", "read-rate", "write-rate"}},
	{"client list", "--workspace WS --member M", []string{"workspace", "member"}},
	{"client rotate-secret", "--member M [--disable-webhooks] CLIENT_ID   (a new secret; ends every token of the client; --disable-webhooks disables its webhook endpoints too)", []string{"member", "disable-webhooks"}},
	{"client set-rates", "--member M [--read-rate N] [--write-rate N] CLIENT_ID   (0 returns to the server default)", []string{"member", "read-rate", "write-rate"}},
	{"client deactivate", "--member M [--revoke-tokens [--disable-webhooks]] CLIENT_ID   (suspends: activate makes the tokens work again; --revoke-tokens ends them)", []string{"member", "revoke-tokens", "disable-webhooks"}},
	{"client activate", "--member M CLIENT_ID   (lifts a deactivation: the tokens it suspended work again)", []string{"member"}},
	{"client revoke", "--member M [--disable-webhooks] CLIENT_ID   (final: the client, every token and every webhook endpoint of it end for good)", []string{"member", "disable-webhooks"}},
	{"webhook list", "--workspace WS --member M [--client CLIENT_ID]   (the webhook endpoints of the workspace's clients, never a secret)", []string{"workspace", "member", "client"}},
	{"webhook disable", "--member M ENDPOINT_ID   (disabledReason admin: the client cannot enable it again)", []string{"member"}},
	{"webhook enable", "--member M ENDPOINT_ID   (undoes a disable: admin, credentials_revoked, failing, gone or backlog; it resumes from the feed)", []string{"member"}},
	{"field list", "--workspace WS [--object contact|lead]   (the workspace's custom field definitions, oldest first)", []string{"workspace", "object"}},
	{"field create", "--workspace WS --member M --object contact|lead --key K --label L --type T [--options value:label,...] [--required] [--description D]   (audited; the API's rules)", []string{"workspace", "member", "object", "key", "label", "type", "options", "required", "description"}},
	{"field delete", "--member M FIELD_ID   (audited; its values leave every answer at once and are erased within 24 h; the key is free after that)", []string{"member"}},
	{"audit list", "--workspace WS --member M [--kind changes|reads] [--action A] [--actor mem_…|cli_…|operator] [--client CLIENT_ID] [--limit N] [--page-token T]   (newest first, refused attempts and reads of the log too unless --kind changes; each event names its actorType and the emails and client name beside the ids; nextPageToken names the next page of the same filters)", []string{"workspace", "member", "kind", "action", "actor", "client", "limit", "page-token"}},
}

// groupHelp prints the commands of a group ("client") for
// `partnerapi client --help`.
func groupHelp(w io.Writer, group string) bool {
	found := false
	for _, c := range commands {
		if strings.HasPrefix(c.name, group+" ") {
			if !found {
				fmt.Fprintf(w, "usage: partnerapi %s <command> [flags]\n\ncommands:\n", group)
			}
			found = true
			fmt.Fprintf(w, "  partnerapi %s %s\n", c.name, c.synopsis)
		}
	}
	if found {
		fmt.Fprintf(w, "\n`partnerapi %s <command> --help` shows a command's flags.\n", group)
	}
	return found
}

// manage runs one management command through the generated Connect client
// and prints the response as one JSON object.
func manage(ctx context.Context, stdout io.Writer, cmd string, args []string) error {
	// takes holds the flags of cmd; an unknown command is a usage error
	// even with --help.
	var takes map[string]bool
	for _, c := range commands {
		if c.name == cmd {
			takes = map[string]bool{"admin-url": true, "admin-token": true}
			for _, f := range c.flags {
				takes[f] = true
			}
		}
	}
	if takes == nil {
		return usageError{msg: fmt.Sprintf("unknown command %q", cmd)}
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	adminURL := fs.String("admin-url", defaultAdminURL(), "admin listener URL")
	adminToken := fs.String("admin-token", env("PARTNER_ADMIN_TOKEN", ""), "admin bearer token")
	name := fs.String("name", "", "name")
	workspace := fs.String("workspace", "", "workspace id (wks_…)")
	member := fs.String("member", "", "acting member id (mem_…)")
	email := fs.String("email", "", "member email")
	settings := fs.Bool("settings-access", false, "grant settings access")
	pending := fs.Bool("pending", false, "leave the member pending approval")
	revokeTokens := fs.Bool("revoke-tokens", false, "also revoke every token of the client, for good: activate does not bring them back (without it, deactivate only suspends them)")
	disableWebhooks := fs.Bool("disable-webhooks", false, "also disable every webhook endpoint of the client (disabledReason credentials_revoked: the client cannot enable them again), for a secret that may have leaked; revoke always does")
	client := fs.String("client", "", "only this API client's (cli_…)")
	scopes := fs.String("scopes", "", "space-delimited scopes")
	limit := fs.Int("limit", 0, "maximum number of results")
	pageToken := fs.String("page-token", "", "the nextPageToken of the previous page")
	kind := fs.String("kind", "", "changes (every event but the reads) or reads (the ….list actions); both when not given")
	action := fs.String("action", "", "only events of this action, e.g. api_client.revoke")
	actor := fs.String("actor", "", "only events of this actor: a member (mem_…), an API client acting with its own token (cli_…) or operator")
	object := fs.String("object", "", "contact or lead")
	key := fs.String("key", "", "the field's key, e.g. budget")
	label := fs.String("label", "", "the field's display name")
	fieldType := fs.String("type", "", "text, number, boolean, date, datetime, select, multiselect, url or email")
	options := fs.String("options", "", "a select type's options, value:label separated by commas, e.g. low:Low,high:High")
	required := fs.Bool("required", false, "records must hold a value")
	description := fs.String("description", "", "what the field is for")
	ttl := fs.Duration("ttl", 0, "how long the sign-in link works, 1s to 5m, e.g. 60s (default 5m)")
	var redirects multi
	fs.Var(&redirects, "redirect-uri", "redirect URI (repeatable; no function yet)")
	var readRate, writeRate optionalRate
	fs.Var(&readRate, "read-rate", "the client's read requests per second (0: the server default)")
	fs.Var(&writeRate, "write-rate", "the client's write requests per second (0: the server default)")
	singleValued(fs)

	// Flags and the one positional argument may come in any order.
	var positional []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			commandHelp(fs, cmd, takes)
			return errHelp
		} else if err != nil {
			return usageError{msg: cmd + ": " + err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	// A flag the command does not take would be silently ignored: the
	// command would not do what was typed.
	var unused []string
	fs.Visit(func(f *flag.Flag) {
		if !takes[f.Name] {
			unused = append(unused, "--"+f.Name)
		}
	})
	if len(unused) > 0 {
		verb := "does"
		if len(unused) > 1 {
			verb = "do"
		}
		return usageError{msg: fmt.Sprintf("%s: %s %s not apply to this command", cmd, strings.Join(unused, ", "), verb)}
	}
	if *limit < 0 || *limit > math.MaxInt32 {
		return usageError{msg: fmt.Sprintf("%s: --limit must be from 0 to %d", cmd, math.MaxInt32)}
	}
	// clientID is the one positional argument: a CLIENT_ID, or the
	// ENDPOINT_ID of a webhook command.
	clientID := func() (string, error) {
		if len(positional) != 1 {
			return "", usageError{msg: fmt.Sprintf("%s: exactly one %s argument is required", cmd, idArgument(cmd))}
		}
		return positional[0], nil
	}
	need := func(pairs ...string) error {
		for i := 0; i < len(pairs); i += 2 {
			if pairs[i+1] == "" {
				return usageError{msg: fmt.Sprintf("%s: --%s is required", cmd, pairs[i])}
			}
		}
		if len(positional) > 0 && idArgument(cmd) == "" {
			return usageError{msg: fmt.Sprintf("%s: unexpected argument %q", cmd, positional[0])}
		}
		// The command line is sound; the last check before a request is
		// that a guessed admin URL is BASE_URL's server.
		given := os.Getenv("PARTNER_ADMIN_URL") != ""
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "admin-url" })
		if !given {
			return checkAdminGuess(*adminURL, os.Getenv("BASE_URL"), os.Getenv("PARTNER_ADMIN_ADDR"), os.Getenv("PARTNER_HTTP_ADDR"))
		}
		return nil
	}

	httpClient := &http.Client{Timeout: 30 * time.Second}
	c := adminv1connect.NewAdminServiceClient(httpClient, strings.TrimSuffix(*adminURL, "/"),
		connect.WithInterceptors(bearer(*adminToken)))

	// reach names the admin URL in an error that reached no listener.
	reach := func(err error) error {
		var u unreachable
		if errors.As(err, &u) {
			return fmt.Errorf("cannot reach the admin API at %s (is `partnerapi serve` running? set PARTNER_ADMIN_URL to its admin listener, the address in PARTNER_ADMIN_ADDR): %s", *adminURL, u.msg)
		}
		return err
	}
	var res proto.Message
	var err error
	switch cmd {
	case "workspace create":
		if err = need("name", *name); err != nil {
			return err
		}
		res, err = call(c.CreateWorkspace(ctx, connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: *name})))
	case "workspace list":
		if err = need(); err != nil {
			return err
		}
		res, err = call(c.ListWorkspaces(ctx, connect.NewRequest(&adminv1.ListWorkspacesRequest{Limit: int32(*limit), PageToken: *pageToken})))
	case "member list":
		if err = need("workspace", *workspace); err != nil {
			return err
		}
		res, err = call(c.ListMembers(ctx, connect.NewRequest(&adminv1.ListMembersRequest{WorkspaceId: *workspace, Limit: int32(*limit), PageToken: *pageToken})))
	case "member update":
		if err = need("member", *member); err != nil {
			return err
		}
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "settings-access" })
		if !given {
			return usageError{msg: cmd + ": --settings-access=true or --settings-access=false is required"}
		}
		res, err = call(c.SetMemberSettingsAccess(ctx, connect.NewRequest(&adminv1.SetMemberSettingsAccessRequest{MemberId: *member, SettingsAccess: *settings})))
	case "member sign-in-link":
		if err = need("member", *member); err != nil {
			return err
		}
		req := &adminv1.CreateSignInLinkRequest{MemberId: *member}
		if *ttl != 0 {
			req.Ttl = durationpb.New(*ttl)
		}
		res, err = call(c.CreateSignInLink(ctx, connect.NewRequest(req)))
	case "member add":
		if err = need("workspace", *workspace, "email", *email); err != nil {
			return err
		}
		res, err = call(c.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{
			WorkspaceId: *workspace, Email: *email, SettingsAccess: *settings, Pending: *pending})))
	case "client create":
		if err = need("workspace", *workspace, "member", *member, "name", *name, "scopes", *scopes); err != nil {
			return err
		}
		res, err = call(c.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{
			WorkspaceId: *workspace, MemberId: *member, Name: *name, Scopes: strings.Fields(*scopes), RedirectUris: redirects,
			ReadRate: readRate.v, WriteRate: writeRate.v})))
	case "client list":
		if err = need("workspace", *workspace, "member", *member); err != nil {
			return err
		}
		res, err = call(c.ListApiClients(ctx, connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: *workspace, MemberId: *member})))
	case "client set-rates":
		if err = need("member", *member); err != nil {
			return err
		}
		if readRate.v == nil && writeRate.v == nil {
			return usageError{msg: cmd + ": --read-rate, --write-rate or both is required"}
		}
		id, err := clientID()
		if err != nil {
			return err
		}
		res, err = call(c.SetApiClientRates(ctx, connect.NewRequest(&adminv1.SetApiClientRatesRequest{
			ClientId: id, MemberId: *member, ReadRate: readRate.v, WriteRate: writeRate.v})))
		if err != nil {
			return reach(err)
		}
	case "client rotate-secret", "client deactivate", "client activate", "client revoke":
		if err = need("member", *member); err != nil {
			return err
		}
		id, err := clientID()
		if err != nil {
			return err
		}
		if cmd == "client deactivate" && *disableWebhooks && !*revokeTokens {
			// A plain deactivation is a pause, which pauses the endpoints
			// too; the server refuses it as well.
			return usageError{msg: cmd + ": --disable-webhooks needs --revoke-tokens"}
		}
		switch cmd {
		case "client rotate-secret":
			res, err = call(c.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: id, MemberId: *member, DisableWebhooks: *disableWebhooks})))
		case "client deactivate":
			res, err = call(c.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: id, MemberId: *member, RevokeTokens: *revokeTokens,
				DisableWebhooks: *disableWebhooks})))
		case "client activate":
			res, err = call(c.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: id, MemberId: *member})))
		default:
			res, err = call(c.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: id, MemberId: *member, DisableWebhooks: *disableWebhooks})))
		}
		if err != nil {
			return reach(err)
		}
	case "webhook list":
		if err = need("workspace", *workspace, "member", *member); err != nil {
			return err
		}
		res, err = call(c.ListWebhookEndpoints(ctx, connect.NewRequest(&adminv1.ListWebhookEndpointsRequest{WorkspaceId: *workspace, MemberId: *member, ClientId: *client})))
	case "webhook disable":
		if err = need("member", *member); err != nil {
			return err
		}
		id, err := clientID()
		if err != nil {
			return err
		}
		res, err = call(c.DisableWebhookEndpoint(ctx, connect.NewRequest(&adminv1.DisableWebhookEndpointRequest{EndpointId: id, MemberId: *member})))
		if err != nil {
			return reach(err)
		}
	case "webhook enable":
		if err = need("member", *member); err != nil {
			return err
		}
		id, err := clientID()
		if err != nil {
			return err
		}
		res, err = call(c.EnableWebhookEndpoint(ctx, connect.NewRequest(&adminv1.EnableWebhookEndpointRequest{EndpointId: id, MemberId: *member})))
		if err != nil {
			return reach(err)
		}
	case "field list":
		if err = need("workspace", *workspace); err != nil {
			return err
		}
		res, err = call(c.ListCustomFields(ctx, connect.NewRequest(&adminv1.ListCustomFieldsRequest{WorkspaceId: *workspace, Object: *object})))
	case "field create":
		if err = need("workspace", *workspace, "member", *member, "object", *object, "key", *key, "label", *label, "type", *fieldType); err != nil {
			return err
		}
		f := &customfieldv1.CustomField{Object: *object, Key: *key, Label: *label, Type: *fieldType, Required: required}
		if *description != "" {
			f.Description = description
		}
		if f.Options, err = parseOptions(*options); err != nil {
			return usageError{msg: cmd + ": " + err.Error()}
		}
		res, err = call(c.CreateCustomField(ctx, connect.NewRequest(&adminv1.CreateCustomFieldRequest{WorkspaceId: *workspace, MemberId: *member, CustomField: f})))
	case "field delete":
		if err = need("member", *member); err != nil {
			return err
		}
		id, err := clientID()
		if err != nil {
			return err
		}
		res, err = call(c.DeleteCustomField(ctx, connect.NewRequest(&adminv1.DeleteCustomFieldRequest{FieldId: id, MemberId: *member})))
		if err != nil {
			return reach(err)
		}
	case "audit list":
		if err = need("workspace", *workspace, "member", *member); err != nil {
			return err
		}
		res, err = call(c.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: *workspace, MemberId: *member, Limit: int32(*limit), PageToken: *pageToken,
			Kind: *kind, Action: *action, Actor: *actor, ClientId: *client})))
	default:
		return usageError{msg: fmt.Sprintf("unknown command %q", cmd)}
	}
	if err != nil {
		return reach(err)
	}
	return printJSON(stdout, res)
}

// parseOptions reads --options: value:label pairs separated by commas
// (a label may hold a colon; the server checks the rest).
func parseOptions(s string) ([]*customfieldv1.CustomFieldOption, error) {
	if s == "" {
		return nil, nil
	}
	var out []*customfieldv1.CustomFieldOption
	for _, pair := range strings.Split(s, ",") {
		value, label, ok := strings.Cut(pair, ":")
		if !ok || value == "" {
			return nil, fmt.Errorf("--options: %q is not value:label", pair)
		}
		out = append(out, &customfieldv1.CustomFieldOption{Value: value, Label: label})
	}
	return out, nil
}

// unreachable is a call that reached no admin listener.
type unreachable struct{ msg string }

func (e unreachable) Error() string { return e.msg }

// defaultAdminURL is where the management commands connect without
// --admin-url: PARTNER_ADMIN_URL; else the admin listener that serve would
// bind with this shell's PARTNER_ADMIN_ADDR (":9091" is 127.0.0.1:9091);
// else serve's default, 127.0.0.1:8081.
func defaultAdminURL() string {
	if u := os.Getenv("PARTNER_ADMIN_URL"); u != "" {
		return u
	}
	if addr := os.Getenv("PARTNER_ADMIN_ADDR"); addr != "" {
		host, port, err := net.SplitHostPort(addr)
		if err == nil && port != "" && port != "0" {
			if host == "" || host == "0.0.0.0" || host == "::" {
				host = "127.0.0.1"
			}
			return "http://" + net.JoinHostPort(host, port)
		}
	}
	return "http://127.0.0.1:8081"
}

// checkAdminGuess refuses an admin URL the CLI worked out itself (no
// --admin-url, no PARTNER_ADMIN_URL) when BASE_URL, the public URL a
// script such as the README's quickstart sets, names another server than
// the one the guess belongs to: the command would create its workspace or
// client on the wrong server, and every later step would fail against the
// right one. The guess is serve's default pair, admin 127.0.0.1:8081 and
// public :8080, or the pair this shell's PARTNER_ADMIN_ADDR and
// PARTNER_HTTP_ADDR name; with PARTNER_ADMIN_ADDR alone the public
// listener is not known and nothing is checked. BASE_URL matches when its
// port is the public listener's and its host is a loopback name or the
// host either listener names.
func checkAdminGuess(adminURL, baseURL, adminAddr, httpAddr string) error {
	if baseURL == "" || (adminAddr != "" && httpAddr == "") {
		return nil
	}
	if httpAddr == "" {
		httpAddr = ":8080"
	}
	publicHost, publicPort, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return nil // serve would refuse it; the admin URL was not derived from it
	}
	adminHost, _, _ := net.SplitHostPort(adminAddr)
	mismatch := func(what string) error {
		return fmt.Errorf("BASE_URL %s names another %s than the public listener (%s) of the server whose admin API this command would use (%s): "+
			"set PARTNER_ADMIN_URL to the admin listener of the server at BASE_URL (the address in its PARTNER_ADMIN_ADDR)",
			baseURL, what, httpAddr, adminURL)
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("BASE_URL %q is not an http or https URL", baseURL)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port != publicPort {
		return mismatch("port")
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) || host == publicHost || host == adminHost {
		return nil
	}
	return mismatch("host")
}

// idArgument is the positional argument cmd takes (CLIENT_ID or
// ENDPOINT_ID), or "" when it takes none.
func idArgument(cmd string) string {
	for _, c := range commands {
		if c.name == cmd {
			// The argument is the synopsis's last word, before any
			// explanation in parentheses.
			words := strings.Fields(strings.SplitN(c.synopsis, "(", 2)[0])
			if last := words[len(words)-1]; strings.HasSuffix(last, "_ID") {
				return last
			}
		}
	}
	return ""
}

// commandHelp prints the synopsis and the flags (those in takes) of one
// known command on stdout.
func commandHelp(fs *flag.FlagSet, cmd string, takes map[string]bool) {
	for _, c := range commands {
		if c.name == cmd {
			printHelp(os.Stdout, fs, cmd+" "+c.synopsis, takes, nil)
		}
	}
}

// call unwraps a Connect response and turns a Connect error into a plain
// message for stderr.
func call[T any](res *connect.Response[T], err error) (proto.Message, error) {
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			if ce.Code() == connect.CodeUnavailable {
				return nil, unreachable{ce.Message()}
			}
			// Our errors' messages begin with their code already
			// ("permission_denied: …"); name it once.
			for _, d := range ce.Details() {
				if v, derr := d.Value(); derr == nil {
					if info, ok := v.(*errdetails.ErrorInfo); ok && strings.HasPrefix(ce.Message(), info.GetReason()+": ") {
						return nil, errors.New(ce.Message())
					}
				}
			}
			return nil, fmt.Errorf("%s: %s", ce.Code(), ce.Message())
		}
		return nil, err
	}
	return any(res.Msg).(proto.Message), nil
}

func bearer(token string) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if token != "" {
				req.Header().Set("Authorization", "Bearer "+token)
			}
			return next(ctx, req)
		}
	})
}

// printJSON prints one compact protojson object (lowerCamelCase) and a
// newline.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}
