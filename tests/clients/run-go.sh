#!/usr/bin/env bash
# A published modern MCP client (the official Go SDK, github.com/modelcontextprotocol/go-sdk,
# pinned in go-modern/go.mod and go.sum) speaks MCP 2026-07-28 to the reference bridge over stdio
# and over Streamable HTTP, fronting the reference testee: server/discover, subscriptions/listen,
# tools/list, tools/call and a tool list change on the listen stream (go-modern/main.go).
#
# Usage: tests/clients/run-go.sh path/to/protomcp-conform [--mrtr] [--transport stdio|http|both]
#   --mrtr  also gets a sampling answer through MRTR (InputRequiredResult and the SDK's retry);
#           CI passes it.
# Exit status: 0 every step passed; 1 a step failed; 2 usage; 3 NOT RUN (no Go toolchain).
# The module download (the Go module proxy, or GOFLAGS/GOPROXY as the user sets them) is
# idempotent: go.sum pins every module, and a module already in the cache is not fetched again.
set -euo pipefail
exec </dev/null
bin=$(realpath "${1:?usage: run-go.sh path/to/protomcp-conform [--mrtr] [--transport stdio|http|both]}")
shift
if [ ! -x "$bin" ]; then
  echo "go-modern: $bin is not an executable; build it first (cargo build)" >&2
  exit 2
fi
if ! command -v go >/dev/null; then
  echo "go-modern: NOT RUN: no Go toolchain on PATH (install Go 1.26 or newer and put go on PATH)"
  exit 3
fi
cd "$(dirname "$0")/go-modern"
export GOFLAGS=-mod=readonly
timeout 300 go mod download
echo "go-modern: $(go version | cut -d' ' -f3), $(go list -m -f '{{.Path}} {{.Version}}' github.com/modelcontextprotocol/go-sdk)"
# The program bounds every step itself (60 s a transport); the outer bound catches a hung build.
timeout 600 go run . --bin "$bin" "$@"
