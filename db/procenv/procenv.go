// Package procenv builds the environment of the programs the service and
// its tools start (initdb, postgres, pg_config, pgbouncer, git, the server
// under benchmark). None inherits this process's environment: it holds
// secrets (PARTNER_ADMIN_TOKEN, DATABASE_URL with its password, whatever
// the operator's shell exports), and a child's environment is readable by
// more people than this process's. The embedded PostgreSQL shows it in
// /proc/<pid>/environ to its own OS account, and hands it to any
// superuser session through COPY … FROM PROGRAM 'env'. A child gets a
// fixed base and the variables it is known to need.
//
// It lives under db/ because db/ is the floor of the module's imports: it
// imports nothing of internal/ or service/, and everything may import it.
// Its first users are the database's own children (db/pgserver's initdb
// and postgres, db/dbtest's pgbouncer and standbys, db/migrationsum's
// git), whose environment is the one a superuser can read; the tools in
// cmd/ take it from here for theirs. A new top-level package would have
// left the design card's layout, and internal/ would make db/ depend on
// the machinery built on it.
package procenv

import (
	"os"
	"strings"
)

// defaultPath is PATH when this process has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Env returns a child's environment: this process's PATH (or a standard
// one) to find programs, TZ when set (the time zone initdb writes into a
// new cluster's configuration), LC_ALL=C (untranslated messages, the C
// locale the cluster is made with), then this process's variables whose
// names are in keep (a name, or a prefix ending in "*" such as
// "PARTNER_*"), then extra ("NAME=value"). A later entry for a name wins
// over an earlier one, as in exec.Cmd.Env.
func Env(keep []string, extra ...string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	env := []string{"PATH=" + path, "LC_ALL=C"}
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}
	if len(keep) > 0 {
		for _, kv := range os.Environ() {
			name, _, _ := strings.Cut(kv, "=")
			if kept(name, keep) {
				env = append(env, kv)
			}
		}
	}
	return append(env, extra...)
}

// kept reports whether name is in keep, or starts with a prefix there
// that ends in "*".
func kept(name string, keep []string) bool {
	for _, k := range keep {
		if p, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(name, p) || k == name {
			return true
		}
	}
	return false
}
