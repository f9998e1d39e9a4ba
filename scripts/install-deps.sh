#!/usr/bin/env bash
# install-deps.sh installs what `make run` and `make test` need from Debian
# when it is missing: the PostgreSQL server binaries (the service starts a
# private PostgreSQL from them; no server needs to be running), curl and jq
# for the README quickstart and the documentation tests, Node.js and npm
# for the TypeScript client, pgbouncer for the tests that run the
# service behind it, chromium for the settings page's browser tests, and
# plpgsql_check for `make lint` (scripts/lint-sql.sh), and promtool for
# `make lint` (check-alerts) and the metrics tests.
set -euo pipefail

have_pg_server() {
  compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null && return 0
  command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/postgres" ] && return 0
  command -v postgres >/dev/null && return 0
  return 1
}

missing=()
have_pg_server || missing+=(postgresql)
command -v curl >/dev/null || missing+=(curl)
command -v jq >/dev/null || missing+=(jq)
# The TypeScript client (clients/ts) needs Node.js 20+ and npm.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if command -v node >/dev/null; then
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 20 ] || echo "warning: Node.js $(node --version) found; clients/ts needs Node.js 20 or later" >&2
fi
# PgBouncer 1.18 (transaction mode) for the pooler tests; the Debian package
# may start a pooler of its own, which the tests do not use.
[ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
# Chromium for the workspace settings page's browser tests
# (service/settings, driven with chromedp); without it they fail.
command -v chromium >/dev/null || missing+=(chromium)
# plpgsql_check, the PL/pgSQL linter of `make lint`: the extension built
# for the installed server (postgresql-<major>-plpgsql-check), so it is
# looked for, and named, once the server is there.
have_plpgsql_check() {
  command -v pg_config >/dev/null && [ -f "$(pg_config --sharedir)/extension/plpgsql_check.control" ]
}
# promtool (promtool check rules / check metrics): Debian's prometheus
# package has it, but installing the package starts a Prometheus server, so
# only usr/bin/promtool is taken from its .deb, into /usr/local/bin.
have_promtool() { command -v promtool >/dev/null; }
[ ${#missing[@]} -eq 0 ] && have_plpgsql_check && have_promtool && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "run as root or install sudo, or: apt-get install -y --no-upgrade ${missing[*]} postgresql-<major>-plpgsql-check" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing missing Debian packages: ${missing[*]}" >&2
  # --no-upgrade: an in-place upgrade of an installed PostgreSQL breaks every
  # running cluster (58P01 until it restarts); only what is missing is added.
  $sudo apt-get install -y -qq --no-upgrade --no-install-recommends "${missing[@]}" >/dev/null
  # The Debian package may start a cluster of its own; the service does not use it.
  $sudo service postgresql stop >/dev/null 2>&1 || true
  $sudo service pgbouncer stop >/dev/null 2>&1 || true
  have_pg_server || { echo "postgresql installed but no server binary found" >&2; exit 1; }
fi
if ! have_plpgsql_check; then
  command -v pg_config >/dev/null || { echo "no pg_config: install postgresql-<major>-plpgsql-check for your PostgreSQL server" >&2; exit 1; }
  # Named after the server's major version, never postgresql-<major> itself,
  # and --no-upgrade (above): only the extension is added.
  pkg=postgresql-$(pg_config --version | sed -E 's/[^0-9]*([0-9]+).*/\1/')-plpgsql-check
  echo "installing missing Debian package: $pkg" >&2
  $sudo apt-get install -y -qq --no-upgrade --no-install-recommends "$pkg" >/dev/null
  have_plpgsql_check || { echo "$pkg installed but plpgsql_check.control not found in $(pg_config --sharedir)/extension" >&2; exit 1; }
fi
if ! have_promtool; then
  echo "installing promtool from Debian's prometheus package" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # apt-get download writes to the current directory, as the _apt user
  # when it can: the directory is made readable to it.
  chmod 0755 "$tmp"
  (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1) || { echo "cannot download Debian's prometheus package" >&2; exit 1; }
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
  $sudo install -m 0755 "$tmp/x/usr/bin/promtool" /usr/local/bin/promtool
  have_promtool || { echo "promtool installed in /usr/local/bin, which is not on PATH" >&2; exit 1; }
fi
