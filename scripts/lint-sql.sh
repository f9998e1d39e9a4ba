#!/usr/bin/env bash
# lint-sql.sh is the SQL part of `make lint`: two linters made for SQL.
#
#   scripts/lint-sql.sh               both, below (what make lint runs)
#   scripts/lint-sql.sh squawk        squawk on the migrations from 00120 on
#   scripts/lint-sql.sh plpgsql       plpgsql_check on a freshly migrated database
#   scripts/lint-sql.sh FILE.sql...   squawk on these files (a draft migration)
#
# squawk (tools/sqllint, npm ci; rules in .squawk.toml) reads a migration's
# Up section, the part `partnerapi migrate` runs while the previous release
# serves, and fails on what would lock or rewrite a busy table or break the
# previous release. Migrations up to 00119 landed before it and are not
# linted (they cannot change; CONTRIBUTING.md, "Migrations are history").
#
# plpgsql_check (Debian's postgresql-NN-plpgsql-check, scripts/install-deps.sh)
# checks every PL/pgSQL function of a database that `partnerapi migrate`
# migrated from nothing: the function files are applied without checking
# their bodies (db/functions.go), so a misspelt column, a type mismatch or
# an unused variable would otherwise wait for the first call. SQL functions
# go through PostgreSQL's own validator. It starts a scratch cluster of its
# own (a temporary directory, a Unix socket only, removed on exit).
set -euo pipefail
cd "$(dirname "$0")/.."
# The lint functions run as `lint_x || rc=1`, where set -e does not
# reach: each step that can fail says so itself (|| return 1).

# squawk's prebuilt binary for this platform (tools/sqllint, npm ci).
case "$(uname -s)-$(uname -m)" in
Linux-x86_64) platform=linux-x64 ;;
Linux-aarch64) platform=linux-arm64 ;;
Darwin-arm64) platform=darwin-arm64 ;;
Darwin-x86_64) platform=darwin-x64 ;;
*) platform=unknown ;;
esac
SQUAWK=tools/sqllint/node_modules/@squawk-cli/$platform/bin/squawk
# Functions plpgsql_check leaves alone, by name, separated by spaces: none.
# A name here needs its reason beside it.
SKIPPED=""
# The first migration squawk reads: 00120 is the newest that landed before
# squawk came, and passes; everything older stays as it landed.
FIRST_LINTED=120

# lint_squawk FILE... runs squawk on each file's Up section: goose runs the
# Down section only when an operator rolls a database back by hand, where
# dropping what the Up added is the point (ban-drop-table and the like).
# The section is read from standard input under the file's own name, so
# the lines squawk reports are the file's.
lint_squawk() {
  [ -x "$SQUAWK" ] || {
    echo "squawk is not installed: run 'make lint' (or: cd tools/sqllint && npm ci); on $platform, add @squawk-cli/$platform to tools/sqllint/package.json first" >&2
    return 1
  }
  # A canary first: squawk must refuse a NOT NULL column without a default,
  # or it is not really checking (a broken install, every rule turned off).
  if printf 'ALTER TABLE t ADD COLUMN c bigint NOT NULL;\n' |
    "$SQUAWK" --config .squawk.toml --stdin-filepath canary.sql >/dev/null 2>&1; then
    echo "squawk passed a NOT NULL column without a default: it is not checking (see .squawk.toml)" >&2
    return 1
  fi
  local f rc=0 tx out
  for f in "$@"; do
    [ -f "$f" ] || { echo "lint-sql: no such file: $f" >&2; rc=1; continue; }
    # goose wraps each migration in a transaction (.squawk.toml says so)
    # unless the file is marked NO TRANSACTION, as one with CREATE INDEX
    # CONCURRENTLY must be; there every statement must be safe to re-run.
    tx=()
    grep -qiE '^--[[:space:]]*\+goose[[:space:]]+NO[[:space:]]+TRANSACTION' "$f" && tx=(--no-assume-in-transaction)
    if ! out=$(awk 'tolower($0) ~ /^--[ \t]*\+goose[ \t]+down/ { exit } { print }' "$f" |
      "$SQUAWK" --config .squawk.toml "${tx[@]}" --stdin-filepath "$f" 2>&1); then
      echo "$out" >&2
      rc=1
    fi
  done
  if [ $rc -eq 0 ] && [ $# -gt 0 ]; then
    local last=${!#}
    echo "squawk: no finding in $# file(s), ${1##*/} to ${last##*/}"
  fi
  return $rc
}

# new_migrations lists db/migrations from FIRST_LINTED on.
new_migrations() {
  local f v
  for f in db/migrations/*.sql; do
    v=$(basename "$f")
    v=${v%%_*}
    [ $((10#$v)) -ge $FIRST_LINTED ] && echo "$f"
  done
  return 0
}

# as_postgres runs a command as the postgres OS user when we are root
# (initdb and postgres refuse to run as root), else as ourselves.
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
  else
    "$@"
  fi
}

lint_plpgsql() {
  command -v pg_config >/dev/null || { echo "PostgreSQL is not installed: run scripts/install-deps.sh" >&2; return 1; }
  # The server the extension was installed for (scripts/install-deps.sh
  # names the package after pg_config's version).
  bin=$(pg_config --bindir)
  [ -f "$(pg_config --sharedir)/extension/plpgsql_check.control" ] || {
    echo "plpgsql_check is not installed for $(pg_config --version): run scripts/install-deps.sh" >&2
    return 1
  }

  # A short directory (Unix socket paths stop at about 107 bytes) that
  # the postgres user owns: the data directory, the socket, the log,
  # and the service binary built for the migration.
  tmp=$(mktemp -d /tmp/lint-sql.XXXXXX)
  trap 'as_postgres "$bin/pg_ctl" -D "$tmp/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
  [ "$(id -u)" -eq 0 ] && chown postgres: "$tmp"
  (cd "$tmp" && as_postgres "$bin/initdb" -D "$tmp/data" -U postgres -A trust --no-sync --locale=C -E UTF8 >"$tmp/initdb.log" 2>&1) || {
    cat "$tmp/initdb.log" >&2
    return 1
  }
  cat >>"$tmp/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$tmp'
fsync = off
full_page_writes = off
synchronous_commit = off
EOF
  (cd "$tmp" && as_postgres "$bin/pg_ctl" -D "$tmp/data" -l "$tmp/postgres.log" -w start >/dev/null) || {
    cat "$tmp/postgres.log" >&2
    return 1
  }
  psql() { "$bin/psql" -h "$tmp" -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
  # The service's own role, not a superuser, as in production (db/pgserver).
  psql -d postgres -c 'CREATE ROLE partnerapi LOGIN' -c 'CREATE DATABASE partnerapi OWNER partnerapi' || return 1

  "${GO:-go}" build -o "$tmp/partnerapi" ./cmd/partnerapi || return 1
  local url="postgres://partnerapi@/partnerapi?host=$tmp&sslmode=disable"
  env DATABASE_URL="$url" PARTNER_DIRECT_DATABASE_URL="$url" PARTNER_READ_DATABASE_URL= \
    "$tmp/partnerapi" migrate >"$tmp/migrate.log" 2>&1 || {
    cat "$tmp/migrate.log" >&2
    return 1
  }

  # One row per finding: file name (the function's), line in the body,
  # level, message, then what plpgsql_check adds (detail, hint, the
  # statement), tab-separated.
  psql -d partnerapi -A -t -F $'\t' -v skipped="$SKIPPED" >"$tmp/findings" <<'SQL' || return 1
CREATE SCHEMA lint;
CREATE EXTENSION plpgsql_check SCHEMA lint;
-- A canary: plpgsql_check must find an unknown column and an unused
-- variable, or it is not really checking.
CREATE FUNCTION lint.canary() RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    unused int;
BEGIN
    RETURN (SELECT no_such_column FROM pg_class LIMIT 1);
END
$$;
DO $$
BEGIN
    IF (SELECT count(*) FROM lint.plpgsql_check_function_tb('lint.canary()', fatal_errors => false)) < 2 THEN
        RAISE EXCEPTION 'plpgsql_check missed an unknown column and an unused variable: it is not checking';
    END IF;
END
$$;
-- SQL functions: PostgreSQL's validator, which CREATE skipped
-- (check_function_bodies is off while function files are applied).
CREATE FUNCTION pg_temp.sql_error(f oid) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fmgr_sql_validator(f);
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLERRM;
END
$$;
SET check_function_bodies = on;
WITH fns AS (
    SELECT p.oid, p.proname, l.lanname, p.prorettype = 'trigger'::regtype AS is_trigger
    FROM pg_proc p
    JOIN pg_namespace n ON n.oid = p.pronamespace
    JOIN pg_language l ON l.oid = p.prolang
    WHERE n.nspname = 'public' AND p.prokind IN ('f', 'p') AND l.lanname IN ('plpgsql', 'sql')
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
      AND p.proname <> ALL (string_to_array(:'skipped', ' '))
),
-- A trigger function is checked against each table whose triggers call
-- it (NEW and OLD are that table's rows), with the transition tables of
-- all those triggers at once: one function serves the INSERT trigger (NEW
-- TABLE only), the UPDATE trigger (both) and the DELETE trigger (OLD TABLE
-- only) of a table, each in its own TG_OP branch, and plpgsql_check reads
-- every branch.
targets AS (
    SELECT f.oid, f.proname, t.tgrelid AS relid, max(t.tgoldtable) AS oldtable, max(t.tgnewtable) AS newtable
    FROM fns f JOIN pg_trigger t ON t.tgfoid = f.oid AND NOT t.tgisinternal
    WHERE f.is_trigger
    GROUP BY f.oid, f.proname, t.tgrelid
    UNION ALL
    SELECT f.oid, f.proname, 0, NULL, NULL FROM fns f WHERE f.lanname = 'plpgsql' AND NOT f.is_trigger
),
findings AS (
    SELECT t.proname, r.lineno, r.level, r.message, r.detail, r.hint, r.statement, r.query
    FROM targets t,
    LATERAL lint.plpgsql_check_function_tb(t.oid, t.relid,
        fatal_errors => false,
        other_warnings => true,
        extra_warnings => true,
        performance_warnings => true,
        security_warnings => true,
        compatibility_warnings => true,
        oldtable => t.oldtable, newtable => t.newtable,
        -- Options are set here, for every function, not in a
        -- function's comments.
        use_incomment_options => false) r
    UNION ALL
    SELECT f.proname, NULL, 'error', 'trigger function called by no trigger: it cannot be checked, and nothing calls it',
           NULL, NULL, NULL, NULL
    FROM fns f WHERE f.is_trigger AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgfoid = f.oid)
    UNION ALL
    SELECT f.proname, NULL, 'error', e, NULL, NULL, NULL, NULL
    FROM fns f, LATERAL pg_temp.sql_error(f.oid) e
    WHERE f.lanname = 'sql' AND e IS NOT NULL
)
SELECT DISTINCT proname, coalesce(lineno, 0), level, regexp_replace(message, '\s+', ' ', 'g'),
       regexp_replace(concat_ws(' | ', 'detail: ' || detail, 'hint: ' || hint, 'statement: ' || statement,
                                'query: ' || query), '\s+', ' ', 'g')
FROM findings
ORDER BY 1, 2, 4;
SQL

  local name lineno level message more at line n=0
  while IFS=$'\t' read -r name lineno level message more; do
    at=db/functions/$name.sql
    # plpgsql_check counts lines from the body's opening $$ (0: none,
    # as for a SQL function's error).
    if [ "$lineno" -gt 0 ] && [ -f "$at" ]; then
      line=$(grep -n -m1 -E '\$[A-Za-z_]*\$' "$at" | cut -d: -f1)
      at="$at:$((line + lineno - 1)) (line $lineno of the body of $name)"
    else
      at="$at ($name)"
    fi
    echo "$at: $level: $message${more:+ [$more]}" >&2
    n=$((n + 1))
  done <"$tmp/findings"
  if [ $n -gt 0 ]; then
    echo "plpgsql_check: $n finding(s); fix them in db/functions (CONTRIBUTING.md, \"How to change a function\")" >&2
    return 1
  fi
  psql -d partnerapi -A -t -v skipped="$SKIPPED" <<'SQL' || return 1
SELECT 'plpgsql_check: no finding in ' || count(*) FILTER (WHERE l.lanname = 'plpgsql') || ' PL/pgSQL and '
       || count(*) FILTER (WHERE l.lanname = 'sql') || ' SQL functions'
       || coalesce(' (not checked: ' || nullif(:'skipped', '') || ')', '')
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = 'public'::regnamespace AND p.proname <> ALL (string_to_array(:'skipped', ' '));
SQL
  return 0
}

case "${1:-all}" in
all)
  mapfile -t files < <(new_migrations)
  rc=0
  lint_squawk "${files[@]}" || rc=1
  lint_plpgsql || rc=1
  exit $rc
  ;;
squawk)
  mapfile -t files < <(new_migrations)
  lint_squawk "${files[@]}"
  ;;
plpgsql) lint_plpgsql ;;
*) lint_squawk "$@" ;;
esac
