package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/svat/partnerapi/db/release"
)

// repoRoot is the top of the git work tree this runs in.
func repoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// buildPrevious builds the previous release's partnerapi in a detached
// git worktree of its commit (so the work tree in use is left alone), with
// its release number as the version, and removes the worktree again.
func buildPrevious(ctx context.Context, root string, p release.Previous, dir string) (string, error) {
	tree := filepath.Join(dir, "prev")
	bin := filepath.Join(dir, "partnerapi-prev")
	if out, err := git(ctx, root, "worktree", "add", "--detach", tree, p.Commit); err != nil {
		return "", fmt.Errorf("add worktree of %s: %w\n%s", p.Commit, err, out)
	}
	defer func() {
		_, _ = git(context.WithoutCancel(ctx), root, "worktree", "remove", "--force", tree)
		_, _ = git(context.WithoutCancel(ctx), root, "worktree", "prune")
	}()
	build := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.version="+p.Version, "-o", bin, "./cmd/partnerapi")
	build.Dir = tree
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build previous release %s: %w\n%s", p.Version, err, out)
	}
	return bin, nil
}

func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// binVersion is what `partnerapi version` prints, for the log of the run.
func binVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "version").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s (version: %v)", bin, err)
	}
	return strings.TrimSpace(string(out))
}
