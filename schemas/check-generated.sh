#!/usr/bin/env bash
# Fails when the committed generated code in protocol/src/generated/ is not exactly what
# schemas/generate.sh produces from the current schemas (installing flatc 25.12.19 if missing).
#
#   schemas/check-generated.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$here/generate.sh" --out "$tmp"
for tree in wire metadata internal; do
  if ! diff -r "$root/protocol/src/generated/$tree" "$tmp/$tree" >"$tmp/diff.txt"; then
    echo "check-generated.sh: protocol/src/generated/$tree is stale; run schemas/generate.sh and commit" >&2
    head -n 40 "$tmp/diff.txt" >&2
    exit 1
  fi
done
echo "check-generated.sh: generated code matches the schemas" >&2
