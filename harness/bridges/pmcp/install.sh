#!/usr/bin/env bash
# Puts pmcp v0.3.0 (github.com/msilverblatt/protomcp/cmd/protomcp, the upstream bridge) at
# target/pmcp/bin/protomcp and prints where it came from. The build step of the manifests
# protomcp-conform.toml here and in ../pmcp-http, and the first step of ci.sh.
#
# Where pmcp comes from, in this order:
#   1. `go install ...@v0.3.0`: the Go module proxy, checksums from the checksum database;
#   2. when the proxy refuses the module: `go build ./cmd/protomcp` in the unmodified source
#      snapshot of the tag at $PROTOMCP_SRC (default: ../shared/third_party/protomcp-v0.3.0 beside
#      the repository), with the snapshot's own go.mod/go.sum; its dependencies come from the
#      proxy. The snapshot may be read-only: only the Go build and module caches are written.
#
# Exit status: 0 installed, 1 a failure (shown), 3 NOT RUN: the proxy refuses the module and
# there is no source snapshot either.
set -euo pipefail
exec </dev/null
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
module=github.com/msilverblatt/protomcp
pkg=$module/cmd/protomcp
version=v0.3.0
gobin="$root/target/pmcp/bin"
src=${PROTOMCP_SRC:-$root/../shared/third_party/protomcp-$version}
# How the snapshot is named in the output: as given, or relative to the repository.
src_shown=${PROTOMCP_SRC:-../shared/third_party/protomcp-$version}

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
if [ ! -f "$src/go.mod" ] || ! grep -qx "module $module" "$src/go.mod" || [ ! -d "$src/cmd/protomcp" ]; then
  echo "pmcp: NOT RUN: $pkg@$version is not served by the Go module proxy ($refusal) and there is no source snapshot at $src_shown (set PROTOMCP_SRC to a checkout of the tag); the pmcp leg cannot run"
  exit 3
fi
# -mod=readonly: the snapshot's go.sum is used as it is (and never written).
if ! (cd "$src" && GOFLAGS="-buildvcs=false -mod=readonly" go build -o "$gobin/protomcp" ./cmd/protomcp) >"$log" 2>&1; then
  cat "$log" >&2
  echo "pmcp: building ./cmd/protomcp in the source snapshot $src_shown failed (see above)" >&2
  exit 1
fi
echo "pmcp: source: $src_shown (the proxy refused: $refusal)"
