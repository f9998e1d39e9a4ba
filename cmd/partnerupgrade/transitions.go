package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db"
)

// startReplica starts a replica of release ("old" or "new") and puts it
// in the rotation once it is ready.
func (u *upgrade) startReplica(ctx context.Context, release string) (*replica, error) {
	bin := u.oldBin
	if release == "new" {
		bin = u.newBin
	}
	name := string(rune('A' + len(u.replicas)))
	logPath := filepath.Join(u.dir, "replica-"+name+"-"+release+".log")
	began := time.Now()
	r, err := startReplica(ctx, name, release, bin, logPath, u.env())
	if r != nil {
		u.replicas = append(u.replicas, r)
	}
	if err != nil {
		if r != nil {
			u.reported[r] = true // its exit is this error
		}
		return r, err
	}
	u.rot.add(r)
	fmt.Printf("  replica %s serves (ready %v after its start; migrations applied at start: %s)\n",
		r, time.Since(began).Round(time.Millisecond), migrationsApplied(ctx, logPath))
	return r, nil
}

var appliedPattern = regexp.MustCompile(`"migrations_applied":([0-9]+)`)

// migrationsApplied is what the replica's log says it applied at start:
// a replica started on a database a newer release migrated applies none.
// The log is written in batches, so it waits a little for the line.
func migrationsApplied(ctx context.Context, logPath string) string {
	found := "not logged"
	_ = until(ctx, 3*time.Second, func() bool {
		b, _ := os.ReadFile(logPath)
		if m := appliedPattern.FindSubmatch(b); m != nil {
			found = string(m[1])
			return true
		}
		return false
	})
	return found
}

// stopReplica takes the oldest replica of release out of the rotation,
// waits for its requests in flight, and stops it with SIGTERM.
func (u *upgrade) stopReplica(ctx context.Context, release string) error {
	var r *replica
	for _, c := range u.replicas {
		if c.release == release && !c.stopping.Load() && !c.gone() {
			r = c
			break
		}
	}
	if r == nil {
		return fmt.Errorf("stop a replica of the %s release: none runs", release)
	}
	began := time.Now()
	if err := u.rot.drain(ctx, r); err != nil {
		return err
	}
	drained := time.Since(began)
	took, err := r.stop()
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tailFile(r.log, 8))
	}
	fmt.Printf("  replica %s out of the rotation (its requests ended within %v), exited cleanly %v after SIGTERM\n",
		r, drained.Round(time.Millisecond), took.Round(time.Millisecond))
	return nil
}

// migrate runs the current build's `partnerapi migrate` on the database
// the previous release serves, then, with -sabotage, breaks the previous
// release.
func (u *upgrade) migrate(ctx context.Context) error {
	logPath := filepath.Join(u.dir, "migrate-new.log")
	f, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("create migration log: %w", err)
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, u.newBin, "migrate")
	cmd.Env = u.env()
	cmd.Stdout, cmd.Stderr = f, f
	began := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("migrate with the current build: %w\n%s", err, tailFile(logPath, 8))
	}
	fmt.Printf("  migrated in %v; its log ends:\n%s\n", time.Since(began).Round(time.Millisecond), tailFile(logPath, 2))
	if u.c.sabotage {
		return u.sabotage(ctx)
	}
	return nil
}

// seal ends the upgrade as docs/operations.md ("Secret keys") asks once
// no replica of the previous release serves: `partnerapi migrate
// --seal-webhook-secrets`. Every secret must then be sealed only, and the
// deliveries go on verifying under the secrets the partner holds.
func (u *upgrade) seal(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, u.newBin, "migrate", "--seal-webhook-secrets")
	cmd.Env = u.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("migrate --seal-webhook-secrets: %w\n%s", err, out)
	}
	conn, err := pgx.Connect(ctx, u.pg.SuperuserURL())
	if err != nil {
		return fmt.Errorf("connect to check the secrets: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	n, err := db.Q.WebhookSecretsInClear(ctx, conn)
	if err != nil {
		return fmt.Errorf("count webhook secrets in the clear: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("after --seal-webhook-secrets %d endpoints still have a secret in the clear", n)
	}
	fmt.Println("  sealed: no webhook secret in the clear")
	return nil
}

// sabotageStatement drops the function every lead create of the previous
// release runs (its db/queries/lead.sql: LeadCreate and LeadCreateMany),
// as a migration that removes what the previous release still calls
// would. The test must then fail: the previous release answers 500 to
// lead creates, during the upgrade and after the rollback.
const sabotageStatement = `DROP FUNCTION lead_create_requests CASCADE`

// sabotage runs sabotageStatement. It is the harness's only statement of
// its own (the checks read through the API), run as the superuser.
func (u *upgrade) sabotage(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, u.pg.SuperuserURL())
	if err != nil {
		return fmt.Errorf("connect to sabotage: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sabotageStatement); err != nil {
		return fmt.Errorf("sabotage: %w", err)
	}
	fmt.Printf("  -sabotage: ran %q after the migration\n", sabotageStatement)
	return nil
}

// shutdown stops the replicas still serving at the end, as the others
// were: each must exit cleanly.
func (u *upgrade) shutdown(ctx context.Context) {
	for _, r := range u.replicas {
		if r.gone() || r.stopping.Load() {
			continue
		}
		if err := u.rot.drain(ctx, r); err != nil {
			u.breaks("end", err.Error())
		}
		if _, err := r.stop(); err != nil {
			u.breaks("end", err.Error()+"\n"+tailFile(r.log, 8))
		}
	}
	u.watch("end")
}
