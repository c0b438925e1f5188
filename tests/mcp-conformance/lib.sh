# Helpers shared by run.sh (suite 0.1.16) and run-next.sh (suite 0.2.0-alpha.12), sourced by both:
# one way of installing Node 22 and a pinned suite from npm, one way of starting and stopping the
# reference bridge over Streamable HTTP in front of `protomcp-conform testee --mcp-conformance`.

NODE_VERSION=22.23.3

# conform_bin PATH: PATH made absolute; exits 2 when it is not an executable.
conform_bin() {
  local bin
  bin=$(realpath "$1")
  if [ ! -x "$bin" ]; then
    echo "mcp-conformance: $bin is not an executable; build it first (cargo build)" >&2
    exit 2
  fi
  echo "$bin"
}

# conformance_install DIR SUITE_VERSION: DIR becomes an npm project holding exactly the pinned suite
# and Node (the npm package `node`), installed idempotently (re-running is a no-op apart from npm's
# own check); its node_modules/.bin goes first on PATH and the Node found there is checked.
conformance_install() {
  local dir=$1 suite=$2 found
  mkdir -p "$dir"
  cat >"$dir/package.json" <<EOF
{
  "name": "protomcp-conform-mcp-conformance",
  "private": true,
  "dependencies": {
    "@modelcontextprotocol/conformance": "$suite",
    "node": "$NODE_VERSION"
  }
}
EOF
  (cd "$dir" && npm install --no-audit --no-fund --no-update-notifier --loglevel=error >/dev/null)
  export PATH="$dir/node_modules/.bin:$PATH"
  found=$(node --version)
  if [ "$found" != "v$NODE_VERSION" ]; then
    echo "mcp-conformance: expected Node v$NODE_VERSION first on PATH, found $found" >&2
    return 1
  fi
  found=$(node -p "require('$dir/node_modules/@modelcontextprotocol/conformance/package.json').version")
  if [ "$found" != "$suite" ]; then
    echo "mcp-conformance: expected @modelcontextprotocol/conformance $suite in $dir, found $found" >&2
    return 1
  fi
  echo "mcp-conformance: @modelcontextprotocol/conformance $found on Node v$NODE_VERSION"
}

# bridge_start BIN LOG: the reference bridge on a free loopback port (port 0; it prints the address
# once the tool process has completed its handshake), its stderr in LOG. Sets bridge_pid and
# bridge_url; fails after 30 s without an address. Callers trap EXIT to bridge_stop.
bridge_pid=
bridge_url=
bridge_start() {
  local bin=$1 log=$2
  : >"$log"
  "$bin" bridge --transport http --host 127.0.0.1 --port 0 -- "$bin" testee --mcp-conformance 2>"$log" &
  bridge_pid=$!
  bridge_url=
  for _ in $(seq 300); do
    bridge_url=$(sed -n 's|^protomcp-conform bridge: listening on \(http://[^ ]*\)$|\1|p' "$log" | head -n 1)
    [ -n "$bridge_url" ] && break
    kill -0 "$bridge_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$bridge_url" ]; then
    echo "mcp-conformance: the bridge did not start listening within 30 s; its stderr:" >&2
    cat "$log" >&2
    return 1
  fi
  echo "mcp-conformance: bridge at $bridge_url (pid $bridge_pid)"
}

# bridge_stop: SIGTERM, up to 5 s, then SIGKILL; reaps it. A no-op when no bridge runs.
bridge_stop() {
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
