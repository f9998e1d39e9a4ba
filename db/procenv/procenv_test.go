package procenv

import (
	"slices"
	"strings"
	"testing"
)

// TestEnvPassesOnlyWhatIsNamed: a child gets PATH, TZ, LC_ALL=C, the
// variables named (or prefixed) in keep and the extras; a secret of this
// process that is not named never reaches it.
func TestEnvPassesOnlyWhatIsNamed(t *testing.T) {
	t.Setenv("PARTNER_ADMIN_TOKEN", "sentinel-admin-token")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "sentinel-aws")
	t.Setenv("PARTNER_RATE_READ", "7")
	t.Setenv("GOGC", "200")
	t.Setenv("TZ", "Europe/Berlin")
	t.Setenv("PATH", "/opt/bin:/usr/bin")

	names := func(env []string) []string {
		var out []string
		for _, kv := range env {
			name, _, _ := strings.Cut(kv, "=")
			out = append(out, name)
		}
		slices.Sort(out)
		return out
	}
	bare := Env(nil)
	if got, want := names(bare), []string{"LC_ALL", "PATH", "TZ"}; !slices.Equal(got, want) {
		t.Errorf("Env(nil) names %v, want %v", got, want)
	}
	for _, kv := range []string{"PATH=/opt/bin:/usr/bin", "LC_ALL=C", "TZ=Europe/Berlin"} {
		if !slices.Contains(bare, kv) {
			t.Errorf("Env(nil) = %v, lacks %s", bare, kv)
		}
	}
	t.Setenv("GOGCX", "sentinel-not-named")
	env := Env([]string{"GOGC", "PARTNER_RATE_*"}, "DATABASE_URL=postgres://x")
	if strings.Contains(strings.Join(env, "\n"), "sentinel") {
		t.Errorf("a secret not named reached the child: %v", env)
	}
	for _, kv := range []string{"GOGC=200", "PARTNER_RATE_READ=7", "DATABASE_URL=postgres://x"} {
		if !slices.Contains(env, kv) {
			t.Errorf("Env = %v, lacks %s", env, kv)
		}
	}
	t.Setenv("PATH", "")
	if !slices.Contains(Env(nil), "PATH="+defaultPath) {
		t.Errorf("without PATH: %v", Env(nil))
	}
}
