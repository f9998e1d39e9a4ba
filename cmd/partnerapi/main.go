// Command partnerapi runs the Partner Workspace API and manages its API
// clients.
//
//	partnerapi serve                 run the public and admin listeners
//	partnerapi migrate               apply database migrations
//	partnerapi workspace create …    bootstrap a workspace
//	partnerapi member add …          bootstrap a member
//	partnerapi client …              create, list, rotate-secret, set-rates, deactivate (a pause;
//	                                 --revoke-tokens ends the tokens), activate, revoke (final)
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
	"syscall"
)

const usage = `usage: partnerapi <command> [flags]

commands:
  serve                      run the API (public listener + admin listener)
  migrate                    apply database migrations and exit
  workspace create --name NAME
  member add --workspace WS --email E [--settings-access] [--pending]
  client create --workspace WS --member M --name N --scopes "contacts:read leads:read" [--redirect-uri URI]...
                [--read-rate N] [--write-rate N]
  client list --workspace WS --member M
  client rotate-secret --member M CLIENT_ID   (a new secret; every token of the client ends)
  client set-rates --member M [--read-rate N] [--write-rate N] CLIENT_ID   (0 returns to the server default)
  client deactivate --member M [--revoke-tokens] CLIENT_ID
                             suspends the client: activate makes its tokens work again, a leaked
                             one too; --revoke-tokens (like rotate-secret and revoke) ends them
  client activate --member M CLIENT_ID
  client revoke --member M CLIENT_ID   (final: the client and every token of it end for good)
  audit list --workspace WS --member M [--limit N] [--page-token T]
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
			fmt.Fprintf(os.Stderr, "partnerapi: %v\n\n%s", err, usage)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "partnerapi: %v\n", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError{"a command is required"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(ctx, rest)
	case "migrate":
		return migrate(ctx, rest)
	case "workspace", "member", "client", "audit":
		if len(rest) == 0 {
			return usageError{cmd + ": a subcommand is required"}
		}
		if rest[0] == "-h" || rest[0] == "--help" || rest[0] == "help" {
			groupHelp(os.Stdout, cmd)
			return errHelp
		}
		return manage(ctx, os.Stdout, cmd+" "+rest[0], rest[1:])
	case "version", "--version":
		if len(rest) > 0 && rest[0] != "-h" && rest[0] != "--help" {
			return usageError{"version takes no arguments"}
		}
		fmt.Println(versionString())
		return nil
	case "help", "-h", "--help":
		fmt.Print(usage)
		fmt.Println()
		writeEnvironment(os.Stdout)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q", cmd)}
}
