#!/usr/bin/env bash
# The decision core (broker/core, package spool-core) must build without the broker's runtime:
# no glommio, no io_uring, no async runtime, no sockets, no libc (DESIGN §2, §3). Its normal
# dependency tree is listed and every crate in it checked against the allowed set, so a new
# dependency is a decision someone makes here, not an accident.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Crates spool-core may depend on (directly or not). Proc-macro crates only run at build time.
allowed='^(spool-core|spool-error-code|bytes|thiserror|thiserror-impl|proc-macro2|quote|syn|unicode-ident)$'
# Named so the failure says what went wrong; any crate outside `allowed` fails too.
forbidden='^(glommio|io-uring|tokio|mio|async-io|async-std|futures-lite|libc|socket2|nix)$'

tree="$(cargo tree -p spool-core --locked --edges normal --prefix none --format '{p}' | awk '{print $1}' | sort -u)"
status=0
while read -r krate; do
  [ -z "$krate" ] && continue
  if [[ "$krate" =~ $forbidden ]]; then
    echo "check-core-deps: spool-core depends on the runtime crate '$krate' (cargo tree -p spool-core -i $krate)" >&2
    status=1
  elif ! [[ "$krate" =~ $allowed ]]; then
    echo "check-core-deps: spool-core depends on '$krate', which is not in the allowed set of scripts/check-core-deps.sh" >&2
    status=1
  fi
done <<<"$tree"
if [ "$status" -eq 0 ]; then
  echo "spool-core depends on: $(echo "$tree" | tr '\n' ' ')(no runtime)"
fi
exit "$status"
