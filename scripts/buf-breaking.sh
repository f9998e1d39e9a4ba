#!/usr/bin/env bash
# buf-breaking.sh compares the protos with those of the main branch
# (WIRE_JSON rules: JSON names are part of the REST contract). The buf
# workspace needs the googleapis module, which is not in git, so the main
# branch's protos are exported into a temporary workspace beside a copy of
# build/googleapis and compared as a directory input.
set -euo pipefail
buf=("$@")
ref=""
for r in main origin/main; do
  if git rev-parse --verify -q "$r^{commit}" >/dev/null; then ref=$r; break; fi
done
if [ -z "$ref" ]; then
  echo "buf breaking: no main branch in this clone; skipped" >&2
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$ref" proto buf.yaml | tar -x -C "$tmp"
mkdir -p "$tmp/build"
cp -r build/googleapis "$tmp/build/"
"${buf[@]}" breaking --against "$tmp"
