#!/usr/bin/env bash
# The mcproto leg of CI (profile proto-mcp): runs the proto-mcp catalogue against the Go server
# mcproto (github tdewitt/mcproto, go/cmd/mcproto, --transport stdio) with the baseline in
# proto-mcp.toml here. Only where MCPROTO_BIN names a built binary: the repository carries no
# license, so neither its source nor a binary can be part of this repository or of CI's inputs;
# the user builds it from its own public source (README.md here). Reports go to target/conformance/mcproto.json
# and mcproto.xml, the whole output to mcproto.log. Arguments are passed on to the harness.
#
# Exit status: the harness's (0 clean; 1 an unexpected FAIL or a stale XPASS; its 3, an ERROR,
# is turned into 1 here), or 3 NOT RUN: MCPROTO_BIN is unset or empty.
set -euo pipefail
exec </dev/null
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out="$root/target/conformance"

if [ -z "${MCPROTO_BIN:-}" ]; then
  echo "mcproto: NOT RUN: MCPROTO_BIN is not set; to run this leg, set it to a build of go/cmd/mcproto of tdewitt/mcproto (harness/servers/mcproto/README.md)"
  exit 3
fi
if [ ! -x "$MCPROTO_BIN" ]; then
  echo "mcproto: MCPROTO_BIN=$MCPROTO_BIN is not an executable file" >&2
  exit 1
fi
export MCPROTO_BIN
mkdir -p "$out"
cd "$root"
status=0
cargo run -q -- --profile proto-mcp --server harness/servers/mcproto \
  --json "$out/mcproto.json" --junit "$out/mcproto.xml" "$@" >"$out/mcproto.log" 2>&1 || status=$?
grep -Ev '^(PASS|SKIP|XFAIL) +[^ ]+ \([0-9]+ ms\)' "$out/mcproto.log" | sed '/./,$!d' || true
if [ "$status" -eq 3 ]; then
  exit 1
fi
exit "$status"
