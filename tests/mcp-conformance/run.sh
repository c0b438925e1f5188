#!/usr/bin/env bash
# The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned, on Node 22
# from the npm package `node`) runs its server scenarios against the reference bridge over
# Streamable HTTP, fronting `protomcp-conform testee --mcp-conformance`. Scenarios that cannot
# apply to protomcp are in expected-failures.yaml, each with its reason; any other failure, and any
# listed scenario that passes, fails this script.
#
# Usage: tests/mcp-conformance/run.sh [path/to/protomcp-conform]   (default: target/debug/...)
# Environment: MCP_CONFORMANCE_DIR (default target/mcp-conformance): npm/ holds the pinned
# packages (installed idempotently), results/ the suite's per-scenario checks.json files,
# suite.log its whole output, bridge.log the bridge's stderr.
set -euo pipefail
exec </dev/null

SUITE_VERSION=0.1.16

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
bin=$(conform_bin "${1:-$root/target/debug/protomcp-conform}")
work=${MCP_CONFORMANCE_DIR:-$root/target/mcp-conformance}
results=$work/results
log=$work/bridge.log

# 1. The pinned packages, exact versions, in a directory of their own (lib.sh).
conformance_install "$work/npm" "$SUITE_VERSION"

# 2. The bridge on a free loopback port, stopped by SIGTERM on every exit path.
trap bridge_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
bridge_start "$bin" "$log"
url=$bridge_url

# 3. The suite's active server scenarios, judged against the baseline; then, of its pending
#    scenarios, the one a tool process can serve (json-schema-2020-12: the bridge passes a 2020-12
#    input schema through unchanged). The other pending one, server-sse-polling, needs a tool that
#    makes the server close its SSE stream mid-call, which is no tool process's business.
rm -rf "$results"
status=0
started=$SECONDS
suite_log=$work/suite.log
{
  timeout 600 conformance server --url "$url" --expected-failures "$here/expected-failures.yaml" -o "$results" ||
    status=$?
  timeout 120 conformance server --url "$url" --scenario json-schema-2020-12 \
    --expected-failures "$here/expected-failures.yaml" -o "$results" || status=$?
} >"$suite_log" 2>&1
elapsed=$((SECONDS - started))
# The suite's report without its per-scenario progress lines (the whole log stays in suite.log).
grep -Ev '^(=== Running scenario|Running client scenario|Results saved to)' "$suite_log" | cat -s || true

# 4. One summary line from the suite's own per-scenario results.
node - "$results" "$elapsed" <<'EOF'
const fs = require('fs'), path = require('path');
const [dir, elapsed] = process.argv.slice(2);
let passed = 0, failed = 0, checks = 0;
const failing = [];
for (const entry of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
  const file = path.join(dir, entry, 'checks.json');
  if (!fs.existsSync(file)) continue;
  const results = JSON.parse(fs.readFileSync(file, 'utf8'));
  checks += results.length;
  if (results.some((c) => c.status === 'FAILURE')) {
    failed++;
    failing.push(entry.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT.*$/, ''));
  } else {
    passed++;
  }
}
console.log(`mcp-conformance: ${passed + failed} scenarios (${checks} checks) in ${elapsed} s: ${passed} passed, ${failed} failed${failed ? ` (${failing.sort().join(', ')})` : ''}`);
EOF
if [ "$status" -ne 0 ]; then
  echo "mcp-conformance: unexpected results (exit status $status); see $suite_log and $log" >&2
fi
exit "$status"
