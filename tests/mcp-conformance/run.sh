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
NODE_VERSION=22.23.3

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(realpath "${1:-$root/target/debug/protomcp-conform}")
if [ ! -x "$bin" ]; then
  echo "mcp-conformance: $bin is not an executable; build it first (cargo build)" >&2
  exit 2
fi
work=${MCP_CONFORMANCE_DIR:-$root/target/mcp-conformance}
npm_dir=$work/npm
results=$work/results
log=$work/bridge.log
mkdir -p "$npm_dir"

# 1. The pinned packages, exact versions, in a directory of their own. Re-running is a no-op
#    apart from npm's own check.
cat >"$npm_dir/package.json" <<EOF
{
  "name": "protomcp-conform-mcp-conformance",
  "private": true,
  "dependencies": {
    "@modelcontextprotocol/conformance": "$SUITE_VERSION",
    "node": "$NODE_VERSION"
  }
}
EOF
(cd "$npm_dir" && npm install --no-audit --no-fund --no-update-notifier --loglevel=error >/dev/null)
export PATH="$npm_dir/node_modules/.bin:$PATH"
node_version=$(node --version)
if [ "$node_version" != "v$NODE_VERSION" ]; then
  echo "mcp-conformance: expected Node v$NODE_VERSION first on PATH, found $node_version" >&2
  exit 1
fi
suite_version=$(node -p "require('$npm_dir/node_modules/@modelcontextprotocol/conformance/package.json').version")
echo "mcp-conformance: @modelcontextprotocol/conformance $suite_version on Node $node_version"

# 2. The bridge on a free loopback port (port 0; it prints the address once the tool process has
#    completed its handshake), stopped by SIGTERM on every exit path.
bridge_pid=
stop_bridge() {
  if [ -n "$bridge_pid" ] && kill -0 "$bridge_pid" 2>/dev/null; then
    kill -TERM "$bridge_pid" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$bridge_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$bridge_pid" 2>/dev/null || true
  fi
  if [ -n "$bridge_pid" ]; then
    wait "$bridge_pid" 2>/dev/null || true
  fi
  bridge_pid=
}
trap stop_bridge EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

: >"$log"
"$bin" bridge --transport http --host 127.0.0.1 --port 0 -- "$bin" testee --mcp-conformance 2>"$log" &
bridge_pid=$!
url=
for _ in $(seq 300); do
  url=$(sed -n 's|^protomcp-conform bridge: listening on \(http://[^ ]*\)$|\1|p' "$log" | head -n 1)
  [ -n "$url" ] && break
  if ! kill -0 "$bridge_pid" 2>/dev/null; then
    break
  fi
  sleep 0.1
done
if [ -z "$url" ]; then
  echo "mcp-conformance: the bridge did not start listening within 30 s; its stderr:" >&2
  cat "$log" >&2
  exit 1
fi
echo "mcp-conformance: bridge at $url (pid $bridge_pid)"

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
