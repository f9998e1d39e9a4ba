#!/usr/bin/env bash
# buf-breaking.sh compares the protos with those of the main branch
# (WIRE_JSON rules: JSON names are part of the REST contract). The main
# branch's buf workspace is exported into a temporary directory and
# compared as a directory input; the googleapis module it names is filled
# from this checkout's copy when the branch predates committing it.
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
paths=(proto buf.yaml)
git cat-file -e "$ref:third_party" 2>/dev/null && paths+=(third_party)
git archive "$ref" "${paths[@]}" | tar -x -C "$tmp"
for dir in build/googleapis third_party/googleapis; do
  if grep -q "path: $dir" "$tmp/buf.yaml" && [ ! -d "$tmp/$dir" ]; then
    mkdir -p "$tmp/$(dirname "$dir")"
    cp -r third_party/googleapis "$tmp/$dir"
  fi
done
"${buf[@]}" breaking --against "$tmp"
