#!/usr/bin/env bash
# A fourth published modern MCP client, the official Rust SDK's client (rmcp 3.11.0, pinned in
# rust-modern/Cargo.toml and Cargo.lock; a package of its own, outside the workspace), speaks MCP
# 2026-07-28 to the reference bridge over stdio and over Streamable HTTP, fronting the reference
# testee: server/discover, tools/list, tools/call, subscriptions/listen with a tool list change, a
# sampling answer through MRTR (rust-modern/src/main.rs).
#
# Usage: tests/clients/run-rust.sh path/to/protomcp-conform [stdio|http|both]
# Exit status: 0 every step passed; 1 a step failed; 2 usage.
# Built with --locked into target/rust-modern-client (idempotent: cargo rebuilds nothing twice).
set -euo pipefail
exec </dev/null
bin=$(realpath "${1:?usage: run-rust.sh path/to/protomcp-conform [stdio|http|both]}")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target="$root/target/rust-modern-client"
timeout 900 cargo build -q --locked --manifest-path "$here/rust-modern/Cargo.toml" --target-dir "$target"
echo "rust-modern: rmcp $(sed -n '/^name = "rmcp"$/{n;s/^version = "\(.*\)"$/\1/p}' "$here/rust-modern/Cargo.lock")"
# The program bounds every step itself (15 s each); the outer bound catches anything else.
timeout 300 "$target/debug/protomcp-conform-rust-modern" --bin "$bin" --transport "${2:-both}"
