package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// previous is the release an upgrade starts from, as PREVIOUS_RELEASE
// records it: the commit and the release number its binary reports.
type previous struct{ commit, version string }

var (
	commitPattern  = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
	versionPattern = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+$`)
)

// readPrevious reads PREVIOUS_RELEASE: one line, "<commit> <release>".
// A release is made by updating this file, so the test always starts
// from what the last release put in production.
func readPrevious(path string) (previous, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return previous{}, fmt.Errorf("read previous release: %w", err)
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 || !commitPattern.MatchString(fields[0]) || !versionPattern.MatchString(fields[1]) {
		return previous{}, fmt.Errorf("read previous release: %s holds %q; want one line \"<commit> <MAJOR.MINOR.PATCH>\"", path, strings.TrimSpace(string(b)))
	}
	return previous{commit: fields[0], version: fields[1]}, nil
}

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
func buildPrevious(ctx context.Context, root string, p previous, dir string) (string, error) {
	tree := filepath.Join(dir, "prev")
	bin := filepath.Join(dir, "partnerapi-prev")
	if out, err := git(ctx, root, "worktree", "add", "--detach", tree, p.commit); err != nil {
		return "", fmt.Errorf("add worktree of %s: %w\n%s", p.commit, err, out)
	}
	defer func() {
		_, _ = git(context.WithoutCancel(ctx), root, "worktree", "remove", "--force", tree)
		_, _ = git(context.WithoutCancel(ctx), root, "worktree", "prune")
	}()
	build := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.version="+p.version, "-o", bin, "./cmd/partnerapi")
	build.Dir = tree
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build previous release %s: %w\n%s", p.version, err, out)
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
