#!/usr/bin/env bash
# The official MCP conformance suite at 0.2.0-alpha.12 (npm @modelcontextprotocol/conformance,
# pinned, on Node 22 from the npm package `node`, lib.sh) runs the server scenarios of each frozen
# requirement set, `--requirements 2025-11-25` (the stateful revision, `initialize`) and
# `--requirements 2026-07-28` (the stateless one: per-request `_meta`, server/discover,
# subscriptions/listen, input_required), against the reference bridge over Streamable HTTP,
# fronting `protomcp-conform testee --mcp-conformance`; a fresh bridge for each set (for
# 2026-07-28, for each scenario of the set: see below). It runs beside run.sh (suite 0.1.16), not
# instead of it.
#
# Each set is judged by the suite against expected-failures-<set>.yaml, one entry per failing
# check (`scenario:check-id`), each with its reason: a failing check not listed, and a listed
# check that passes, fail this script. The suite leaves the scenarios a set runs without scoring
# (extensions, pending, added after its release) out of the judgement; they are reported.
#
# Usage: tests/mcp-conformance/run-next.sh [path/to/protomcp-conform] [SET...]
#   SET: 2025-11-25, 2026-07-28 (default: both)
# Environment: MCP_CONFORMANCE_DIR (default target/mcp-conformance): npm-next/ holds the pinned
# packages (installed idempotently); next-<set>/ the suite's per-scenario checks.json files
# (results/), its whole output (suite.log) and the bridge's stderr (bridge.log).
set -euo pipefail
exec </dev/null

SUITE_VERSION=0.2.0-alpha.12

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
bin=$(conform_bin "${1:-$root/target/debug/protomcp-conform}")
shift || true
sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(2025-11-25 2026-07-28)
work=${MCP_CONFORMANCE_DIR:-$root/target/mcp-conformance}
npm_dir=$work/npm-next

conformance_install "$npm_dir" "$SUITE_VERSION"

trap bridge_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

status=0
for set in "${sets[@]}"; do
  baseline=$here/expected-failures-$set.yaml
  if [ ! -f "$baseline" ]; then
    echo "mcp-conformance: no baseline $baseline for requirement set $set" >&2
    exit 2
  fi
  dir=$work/next-$set
  rm -rf "$dir"
  mkdir -p "$dir"
  echo
  echo "mcp-conformance: requirement set $set"
  started=$SECONDS
  set_status=0
  if [ "$set" = 2026-07-28 ]; then
    # One scenario at a time, each against a fresh bridge. The suite runs a set's scenarios
    # concurrently against one server, and several of its input_required scenarios leave a call
    # parked (a retry never sent, a tampered state refused). A SamplingRequest names no call, so
    # while more than one call is pending the bridge cannot tell whose it is and refuses it
    # (BR-SAMPLING-09, spec section 26.4 "Attribution"); a concurrent run would fail those
    # scenarios by timing. The set's frozen scenario list comes from the suite's own
    # requirements/2026-07-28.yaml; each run is judged by the suite against the baseline.
    mapfile -t scenarios < <(node -e '
      const path = require("path"), fs = require("fs");
      const yaml = require(path.join(process.argv[1], "node_modules/yaml"));
      const f = path.join(process.argv[1], "node_modules/@modelcontextprotocol/conformance/requirements", process.argv[2] + ".yaml");
      for (const s of yaml.parse(fs.readFileSync(f, "utf8")).server) console.log(s);' "$npm_dir" "$set")
    : >"$dir/suite.log"
    : >"$dir/bridge.log"
    for sc in "${scenarios[@]}"; do
      bridge_start "$bin" "$dir/bridge-one.log" >/dev/null
      sc_status=0
      echo "=== scenario $sc" >>"$dir/suite.log"
      timeout 120 conformance server --url "$bridge_url" --scenario "$sc" \
        --expected-failures "$baseline" -o "$dir/results" >>"$dir/suite.log" 2>&1 || sc_status=$?
      bridge_stop
      cat "$dir/bridge-one.log" >>"$dir/bridge.log"
      if [ "$sc_status" -ne 0 ]; then
        echo "mcp-conformance $set: scenario $sc: unexpected results (exit status $sc_status)"
        set_status=$sc_status
      fi
    done
    rm -f "$dir/bridge-one.log"
    elapsed=$((SECONDS - started))
    grep -E 'Unexpected failures|Stale baseline|not in your expected|now passing' -A4 "$dir/suite.log" | cat -s || true
  else
    bridge_start "$bin" "$dir/bridge.log"
    # The suite times each scenario out itself (30 s); the outer bound catches a hang of the suite.
    timeout 900 conformance server --url "$bridge_url" --requirements "$set" \
      --expected-failures "$baseline" -o "$dir/results" >"$dir/suite.log" 2>&1 || set_status=$?
    elapsed=$((SECONDS - started))
    bridge_stop
    # The suite's summary and its judgement against the baseline (the whole log stays in suite.log).
    sed -n '/^=== SUMMARY ===/,$p' "$dir/suite.log" | cat -s
  fi
  # One line from the suite's own per-scenario results: the scored scenarios of the set, then the
  # rest.
  node - "$dir/results" "$npm_dir" "$set" "$elapsed" <<'EOF'
const fs = require('fs'), path = require('path');
const [dir, npm, set, elapsed] = process.argv.slice(2);
const yaml = require(path.join(npm, 'node_modules/yaml'));
const reqs = yaml.parse(fs.readFileSync(
  path.join(npm, 'node_modules/@modelcontextprotocol/conformance/requirements', `${set}.yaml`), 'utf8'));
const scored = new Set(reqs.server);
const count = { scored: [0, 0, 0], other: [0, 0, 0] }; // scenarios passed, failed; checks
const failing = [];
for (const entry of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
  const file = path.join(dir, entry, 'checks.json');
  if (!fs.existsSync(file)) continue;
  const name = entry.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT.*$/, '');
  const checks = JSON.parse(fs.readFileSync(file, 'utf8'));
  const c = scored.has(name) ? count.scored : count.other;
  c[2] += checks.length;
  if (checks.some((k) => k.status === 'FAILURE' || k.status === 'WARNING')) {
    c[1]++;
    if (scored.has(name)) failing.push(name);
  } else {
    c[0]++;
  }
}
const [p, f, k] = count.scored, [op, of, ok] = count.other;
console.log(`mcp-conformance ${set}: ${p + f} scored scenarios (${k} checks) in ${elapsed} s: ${p} passed, ${f} failed` +
  `${f ? ` (${failing.sort().join(', ')})` : ''}; not scored: ${op} passed, ${of} failed (${ok} checks)`);
EOF
  if [ "$set_status" -ne 0 ]; then
    echo "mcp-conformance $set: unexpected results (exit status $set_status); see $dir/suite.log and $dir/bridge.log" >&2
    status=$set_status
  fi
done
exit "$status"
