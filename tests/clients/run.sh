#!/usr/bin/env bash
# A published MCP client (the `mcp` Python package, pinned) lists and calls tools through the
# reference bridge over stdio. Usage: tests/clients/run.sh path/to/protomcp-conform
set -euo pipefail
bin=$(realpath "${1:?usage: run.sh path/to/protomcp-conform}")
venv=${MCP_CLIENT_VENV:-target/mcp-client-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q 'mcp==2.3.0'
"$venv/bin/python" "$(dirname "$0")/mcp_python_client.py" "$bin"
