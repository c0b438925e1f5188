#!/usr/bin/env bash
# A third published modern MCP client, the official TypeScript client v2
# (@modelcontextprotocol/client, pinned in ts-modern/package.json and package-lock.json), speaks
# MCP 2026-07-28 to the reference bridge over stdio and over Streamable HTTP, fronting the reference
# testee: server/discover, tools/list, tools/call, subscriptions/listen with a tool list change, a
# sampling answer through MRTR (ts-modern/main.mjs).
#
# Usage: tests/clients/run-ts.sh path/to/protomcp-conform [stdio|http|both]
# Exit status: 0 every step passed; 1 a step failed; 2 usage.
# Node 22 comes from the npm package `node` (pinned), like the conformance suite's; `npm ci` is
# idempotent and installs exactly the lock file.
set -euo pipefail
exec </dev/null
bin=$(realpath "${1:?usage: run-ts.sh path/to/protomcp-conform [stdio|http|both]}")
cd "$(dirname "$0")/ts-modern"
timeout 300 npm ci --no-audit --no-fund --no-update-notifier --loglevel=error >/dev/null
export PATH="$PWD/node_modules/.bin:$PATH"
echo "ts-modern: Node $(node --version), @modelcontextprotocol/client $(node -p "require('./node_modules/@modelcontextprotocol/client/package.json').version")"
# The program bounds every step itself (15 s each); the outer bound catches anything else.
timeout 300 node main.mjs --bin "$bin" --transport "${2:-both}"
