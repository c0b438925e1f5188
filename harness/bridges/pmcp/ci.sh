#!/usr/bin/env bash
# The pmcp leg of CI: installs pmcp v0.3.0 (github.com/msilverblatt/protomcp/cmd/protomcp, the
# upstream bridge) into target/pmcp/bin with install.sh (the module proxy) and runs the BR catalogue against it twice, through the
# manifests beside this script: over stdio (protomcp-conform.toml here) and over Streamable HTTP
# (../pmcp-http), each with its known-failures.yaml. Prints the harness's summaries and
# unexpected cases only; reports in target/conformance/pmcp{,-http}.{json,xml}, the whole output
# in target/conformance/pmcp{,-http}.log.
#
# PMCP_BIN=/path/to/protomcp skips the install and judges that binary instead (a build of
# upstream's tag v0.3.0 that the user made; no script here builds it).
#
# Exit status: the harness's (0 clean, 1 unexpected FAIL or stale XPASS, ...; its 3, an ERROR, is
# turned into 1 here), or
#   3  NOT RUN: the proxy refuses the module and PMCP_BIN is not set.
set -euo pipefail
exec </dev/null
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out="$root/target/conformance"
mkdir -p "$out"

bin=${PMCP_BIN:-}
if [ -z "$bin" ]; then
  # Prints the source used; 3 = NOT RUN (the proxy refuses it; the line says how to supply one).
  "$here/install.sh"
  bin="$root/target/pmcp/bin/protomcp"
fi

cd "$root"
cargo build -q
# One run per transport: stdio (this directory's manifest) and Streamable HTTP (../pmcp-http).
status=0
for leg in pmcp pmcp-http; do
  dir="$root/harness/bridges/$leg"
  if [ -n "${PMCP_BIN:-}" ]; then
    cmd=$(sed -n 's/^bridge = "[^ ]*protomcp \(.*\)"$/\1/p' "$dir/protomcp-conform.toml")
    target=(--bridge "$bin $cmd" --known-failures "$dir/known-failures.yaml" --features socket)
    [ "$leg" = pmcp-http ] && target+=(--bridge-transport http)
  else
    target=(--bridge "$dir")  # the manifest: its build step runs install.sh again (cached, seconds)
  fi
  leg_status=0
  leg_started=$SECONDS
  ./target/debug/protomcp-conform "${target[@]}" --json "$out/$leg.json" --junit "$out/$leg.xml" \
    >"$out/$leg.log" 2>&1 || leg_status=$?
  echo "$leg: ($((SECONDS - leg_started)) s)"
  grep -Ev '^(PASS|FAIL|WARN|SKIP|XFAIL|XPASS|ERROR) +[^ ]+ \([0-9]+ ms\)' "$out/$leg.log" | sed '/./,$!d' || true
  if [ "$leg_status" -eq 3 ]; then
    # The harness's 3 is an ERROR (it could not judge a scenario), not this script's NOT RUN.
    echo "$leg: the harness reported an ERROR (its exit status 3)"
    leg_status=1
  fi
  [ "$status" -ne 0 ] || status=$leg_status
done
exit "$status"
