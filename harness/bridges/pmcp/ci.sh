#!/usr/bin/env bash
# The pmcp leg of CI: installs pmcp v0.3.0 (github.com/msilverblatt/protomcp/cmd/protomcp, the
# upstream bridge) with `go install` into target/pmcp/bin and runs the BR catalogue against it
# twice, through the manifests beside this script: over stdio (protomcp-conform.toml here) and over
# Streamable HTTP (../pmcp-http), each with its known-failures.yaml. Prints the harness's summaries
# and unexpected cases only; reports in target/conformance/pmcp{,-http}.{json,xml}.
#
# PMCP_BIN=/path/to/protomcp skips the install and judges that binary instead (e.g. one built
# from a source checkout of the tag with `go build ./cmd/protomcp`).
#
# Exit status: the harness's (0 clean, 1 unexpected FAIL or stale XPASS, ...), or
#   3  the module is not served (the proxy refuses it): the pmcp leg cannot run here.
set -euo pipefail
exec </dev/null
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
pkg=github.com/msilverblatt/protomcp/cmd/protomcp
version=v0.3.0
out="$root/target/conformance"
mkdir -p "$out"

bin=${PMCP_BIN:-}
if [ -z "$bin" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "pmcp: the Go toolchain is not installed; the pmcp leg cannot run" >&2
    exit 1
  fi
  gobin="$root/target/pmcp/bin"
  mkdir -p "$gobin"
  install_log=$(mktemp)
  trap 'rm -f "$install_log"' EXIT
  # Outside any module, with no -modfile from the caller: `go install pkg@version` resolves the
  # module and its go.sum through the proxy and the checksum database on its own.
  if ! (cd "$gobin" && GOBIN="$gobin" GOFLAGS=-buildvcs=false go install "$pkg@$version") >"$install_log" 2>&1; then
    if grep -qE '(403|404|410) |not available|not found|unknown revision|no matching versions' "$install_log"; then
      reason=$(grep -m1 -oE '(403|404|410) [A-Za-z ]+' "$install_log" || true)
      echo "pmcp: NOT RUN: $pkg@$version is not served by the Go module proxy${reason:+ ($reason)}; the pmcp leg cannot run"
      exit 3
    fi
    cat "$install_log" >&2
    echo "pmcp: installing $pkg@$version failed (see above)" >&2
    exit 1
  fi
  bin="$gobin/protomcp"
fi

cd "$root"
cargo build -q
log=$(mktemp)
trap 'rm -f "$log" "${install_log:-}"' EXIT
# One run per transport: stdio (this directory's manifest) and Streamable HTTP (../pmcp-http).
status=0
for leg in pmcp pmcp-http; do
  dir="$root/harness/bridges/$leg"
  if [ -n "${PMCP_BIN:-}" ]; then
    cmd=$(sed -n 's/^bridge = "[^ ]*protomcp \(.*\)"$/\1/p' "$dir/protomcp-conform.toml")
    target=(--bridge "$bin $cmd" --known-failures "$dir/known-failures.yaml" --features socket)
    [ "$leg" = pmcp-http ] && target+=(--bridge-transport http)
  else
    target=(--bridge "$dir")  # the manifest: its build step finds the install above done
  fi
  leg_status=0
  ./target/debug/protomcp-conform "${target[@]}" --json "$out/$leg.json" --junit "$out/$leg.xml" >"$log" 2>&1 ||
    leg_status=$?
  echo "$leg:"
  grep -Ev '^(PASS|FAIL|WARN|SKIP|XFAIL|XPASS|ERROR) +[^ ]+ \([0-9]+ ms\)' "$log" | sed '/./,$!d' || true
  [ "$status" -ne 0 ] || status=$leg_status
done
exit "$status"
