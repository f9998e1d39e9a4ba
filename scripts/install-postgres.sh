#!/usr/bin/env bash
# install-postgres.sh makes sure the PostgreSQL server binaries are present.
# The service (and its tests) start a private PostgreSQL from them; no server
# needs to be running. On Debian they come from the `postgresql` package and
# live in /usr/lib/postgresql/<version>/bin.
set -euo pipefail

have_server() {
  compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null && return 0
  command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/postgres" ] && return 0
  command -v postgres >/dev/null && return 0
  return 1
}

if have_server; then
  exit 0
fi

echo "PostgreSQL server binaries not found; installing Debian's postgresql package" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "run as root or install sudo, or: apt-get install -y postgresql" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null
# The Debian package starts a cluster of its own; we do not use it.
$sudo service postgresql stop >/dev/null 2>&1 || true
have_server || { echo "postgresql installed but no server binary found" >&2; exit 1; }
