#!/usr/bin/env bash
# install-ha-deps.sh installs what `make test-ha` needs from Debian when it
# is missing: Patroni, the etcd server and HAProxy (cmd/partnerha starts a
# private etcd, a 3-node Patroni cluster and an HAProxy from them; none of
# them needs to be running, and the packages' own services are stopped).
#
# It never upgrades: --no-upgrade leaves an installed package alone, and
# postgresql-15 is never named, because an in-place upgrade of the server
# package makes every running cluster fail to load plpgsql.so (SQLSTATE
# 58P01) until it restarts. Quiet when everything is present.
set -euo pipefail

missing=()
command -v patroni >/dev/null && command -v patronictl >/dev/null || missing+=(patroni)
command -v etcd >/dev/null || missing+=(etcd-server)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing missing Debian packages: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "run as root or install sudo, or: apt-get install -y --no-upgrade ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# Patroni depends on a PostgreSQL server; an installed one satisfies it and
# --no-upgrade keeps it at its version.
$sudo apt-get install -y -qq --no-upgrade "${missing[@]}" >/dev/null
# The packages may start services of their own (etcd on 2379, haproxy on
# its default configuration); the harness runs private ones on free ports.
for s in etcd haproxy patroni; do
  $sudo service "$s" stop >/dev/null 2>&1 || true
done
command -v patroni >/dev/null && command -v etcd >/dev/null && { command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ]; } ||
  { echo "installed ${missing[*]} but patroni, etcd or haproxy is still missing" >&2; exit 1; }
