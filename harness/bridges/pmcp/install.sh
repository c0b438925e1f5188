#!/usr/bin/env bash
# Puts pmcp v0.3.0 (github.com/msilverblatt/protomcp/cmd/protomcp, the upstream bridge) at
# target/pmcp/bin/protomcp and prints where it came from. The build step of the manifests
# protomcp-conform.toml here and in ../pmcp-http, and the first step of ci.sh.
#
# Where pmcp comes from: `go install ...@v0.3.0`, the Go module proxy with checksums from the
# checksum database. When the proxy refuses the module this script says NOT RUN (exit 3) and how to
# hand over a build instead: PMCP_BIN=/path/to/protomcp, a binary the user built from upstream
# protomcp's own public source at tag v0.3.0 (cmd/protomcp). This repository keeps no upstream
# source and no script here builds it.
#
# Exit status: 0 installed, 1 a failure (shown), 3 NOT RUN: the proxy refuses the module.
set -euo pipefail
exec </dev/null
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
module=github.com/msilverblatt/protomcp
pkg=$module/cmd/protomcp
version=v0.3.0
gobin="$root/target/pmcp/bin"

if ! command -v go >/dev/null 2>&1; then
  echo "pmcp: the Go toolchain is not installed; the pmcp leg cannot run" >&2
  exit 1
fi
mkdir -p "$gobin"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Outside any module, with no -modfile from the caller: `go install pkg@version` resolves the
# module and its go.sum through the proxy and the checksum database on its own.
if (cd "$gobin" && GOBIN="$gobin" GOFLAGS=-buildvcs=false go install "$pkg@$version") >"$log" 2>&1; then
  echo "pmcp: source: module proxy ($pkg@$version)"
  exit 0
fi
if ! grep -qE '(403|404|410) |not available|not found|unknown revision|no matching versions' "$log"; then
  cat "$log" >&2
  echo "pmcp: installing $pkg@$version failed (see above)" >&2
  exit 1
fi
refusal=$(grep -m1 -oE '(403|404|410) [A-Za-z ]+' "$log" || true)
refusal=${refusal:-$(grep -m1 -oE 'not available|not found|unknown revision|no matching versions' "$log")}
echo "pmcp: NOT RUN: $pkg@$version is not served by the Go module proxy ($refusal); to run the pmcp legs, set PMCP_BIN to a protomcp binary built from upstream's tag $version (cmd/protomcp)"
exit 3
