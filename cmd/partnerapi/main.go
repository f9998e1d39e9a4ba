// Command partnerapi runs the Partner Workspace API and manages its API
// clients.
//
//	partnerapi serve                 run the public and admin listeners
//	partnerapi migrate               apply database migrations
//	partnerapi workspace create|list  bootstrap and list workspaces
//	partnerapi member add|list|update|sign-in-link
//	                                 bootstrap, list and change members; sign them in to the settings page
//	partnerapi client …              create, list, rotate-secret, set-rates, deactivate (a pause;
//	                                 --revoke-tokens ends the tokens), activate, revoke (final);
//	                                 --disable-webhooks disables the client's webhook endpoints too
//	partnerapi webhook list|disable|enable …  list the clients' webhook endpoints; disable one, enable it again
//	partnerapi field list|create|delete …  list, define and delete custom fields
//	partnerapi audit list …          list management actions
//	partnerapi version               print the version
//
// Configuration comes from the environment; a flag of the same meaning
// overrides it. This package parses configuration and prints results; all
// behaviour lives in internal/ and db/.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `usage: partnerapi <command> [flags]

commands:
  serve                      run the API (public listener + admin listener)
  migrate                    apply database migrations and exit
  workspace create --name NAME
  workspace list [--limit N] [--page-token T]
  member add --workspace WS --email E [--settings-access] [--pending]
  member list --workspace WS [--limit N] [--page-token T]
  member update --member M --settings-access=true|false
  member sign-in-link --member M [--ttl D]
  client create --workspace WS --member M --name N --scopes "contacts:read leads:read" [--redirect-uri URI]...
                [--read-rate N] [--write-rate N]
  client list --workspace WS --member M
  client rotate-secret --member M [--disable-webhooks] CLIENT_ID   (a new secret; every token of the client ends)
                             --disable-webhooks (deactivate --revoke-tokens and revoke take it too) also
                             disables every webhook endpoint of the client: for a secret that may have
                             leaked (docs/security.md, "If a client secret leaks")
  client set-rates --member M [--read-rate N] [--write-rate N] CLIENT_ID   (0 returns to the server default)
  client deactivate --member M [--revoke-tokens [--disable-webhooks]] CLIENT_ID
                             suspends the client: activate makes its tokens work again, a leaked
                             one too; --revoke-tokens (like rotate-secret and revoke) ends them
  client activate --member M CLIENT_ID
  client revoke --member M [--disable-webhooks] CLIENT_ID   (final: the client, its tokens and its
                             webhook endpoints end for good)
  webhook list --workspace WS --member M [--client CLIENT_ID]
  webhook disable --member M ENDPOINT_ID   (an administrator's: the client cannot enable it again)
  webhook enable --member M ENDPOINT_ID   (undoes a disable by an administrator or the delivery engine;
                             it resumes from the feed; a revoked client's endpoints stay disabled)
  field list --workspace WS [--object contact|lead]
  field create --workspace WS --member M --object contact|lead --key K --label L --type T
               [--options value:label,...] [--required] [--description D]
  field delete --member M FIELD_ID   (its values leave every answer at once, erased within 24 h)
  audit list --workspace WS --member M [--kind changes|reads] [--action A] [--actor ID|operator] [--client CLIENT_ID] [--limit N] [--page-token T]
  version                    print the version

'partnerapi <command> --help' shows a command's flags; 'serve --help' also
lists every environment variable.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		if errors.Is(err, errHelp) {
			os.Exit(0)
		}
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintf(os.Stderr, "partnerapi: %v\n\n%s", err, commandUsage(u.cmd))
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "partnerapi: %v\n", err)
		os.Exit(1)
	}
}

// usageError is a command line that cannot mean anything: exit 2 with the
// usage of the command it names (cmd, when known) or the global usage.
type usageError struct{ msg, cmd string }

func (e usageError) Error() string { return e.msg }

// in names the command a usage error is about, so that its own synopsis,
// not the list of every command, is printed.
func in(cmd string, err error) error {
	var u usageError
	if errors.As(err, &u) && u.cmd == "" && knownCommand(cmd) {
		u.cmd = cmd
		return u
	}
	return err
}

func knownCommand(cmd string) bool {
	if cmd == "serve" || cmd == "migrate" {
		return true
	}
	for _, c := range commands {
		if c.name == cmd || strings.HasPrefix(c.name, cmd+" ") {
			return true
		}
	}
	return false
}

// commandUsage is the usage printed after a usage error: the command's
// synopsis when cmd names one, its commands when cmd names a group
// ("audit"), else every command.
func commandUsage(cmd string) string {
	switch cmd {
	case "":
		return usage
	case "serve", "migrate":
		return fmt.Sprintf("usage: partnerapi %s [flags]\n\n'partnerapi %s --help' lists its flags and environment variables.\n", cmd, cmd)
	}
	for _, c := range commands {
		if c.name == cmd {
			return fmt.Sprintf("usage: partnerapi %s %s\n\n'partnerapi %s --help' lists its flags.\n", c.name, c.synopsis, c.name)
		}
	}
	var group strings.Builder
	if groupHelp(&group, cmd) {
		return group.String()
	}
	return usage
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError{msg: "a command is required"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return in(cmd, serve(ctx, rest))
	case "migrate":
		return in(cmd, migrate(ctx, rest))
	case "workspace", "member", "client", "webhook", "field", "audit":
		if len(rest) == 0 {
			return usageError{msg: cmd + ": a subcommand is required", cmd: cmd}
		}
		if rest[0] == "-h" || rest[0] == "--help" || rest[0] == "help" {
			groupHelp(os.Stdout, cmd)
			return errHelp
		}
		// An unknown subcommand gets the group's usage, a known one its own.
		return in(cmd, in(cmd+" "+rest[0], manage(ctx, os.Stdout, cmd+" "+rest[0], rest[1:])))
	case "version", "--version":
		if len(rest) > 0 && rest[0] != "-h" && rest[0] != "--help" {
			return usageError{msg: "version takes no arguments"}
		}
		fmt.Println(versionString())
		return nil
	case "help", "-h", "--help":
		fmt.Print(usage)
		fmt.Println()
		writeEnvironment(os.Stdout)
		return nil
	}
	return usageError{msg: fmt.Sprintf("unknown command %q", cmd)}
}
