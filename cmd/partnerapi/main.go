// Command partnerapi runs the Partner Workspace API and manages its API
// clients.
//
//	partnerapi serve                 run the public and admin listeners
//	partnerapi migrate               apply database migrations
//	partnerapi workspace create …    bootstrap a workspace
//	partnerapi member add …          bootstrap a member
//	partnerapi client …              create, list, rotate-secret, deactivate, activate, revoke
//	partnerapi audit list …          list management actions
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
  client list --workspace WS --member M
  client rotate-secret --member M CLIENT_ID
  client deactivate|activate|revoke --member M CLIENT_ID
  audit list --workspace WS --member M [--limit N]

environment (flags of the same name override):
  PARTNER_HTTP_ADDR   public listener            (default :8080)
  PARTNER_ADMIN_ADDR  admin listener             (default 127.0.0.1:8081)
  PARTNER_ADMIN_TOKEN bearer token of admin calls (default unset: none required)
  DATABASE_URL        PostgreSQL URL             (default unset: embedded PostgreSQL)
  PARTNER_DATA_DIR    embedded PostgreSQL files  (default ./.data)
  PARTNER_ADMIN_URL   where the CLI connects     (default http://127.0.0.1:8081)
  PARTNER_DIRECT_DATABASE_URL  PostgreSQL without a pooler, for LISTEN and migrations (default DATABASE_URL)
  PARTNER_DB_MAX_CONNS         pool size                  (default max(8, 4 x cores))
  PARTNER_DB_ACQUIRE_TIMEOUT   wait for a connection      (default 1s)
  PARTNER_DB_STATEMENT_TIMEOUT bound of each statement    (default 2s)
  PARTNER_REQUEST_TIMEOUT      database budget of a request (default 4s)
  PARTNER_SHUTDOWN_DELAY       serve on after SIGTERM     (default 0s)
  PARTNER_SHUTDOWN_TIMEOUT     exit within this of SIGTERM (default 25s)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
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
		return manage(ctx, os.Stdout, cmd+" "+rest[0], rest[1:])
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q", cmd)}
}
