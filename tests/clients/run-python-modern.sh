#!/usr/bin/env bash
# A second published modern MCP client (the `mcp` Python package's high-level Client, pinned
# here) speaks MCP 2026-07-28 to the reference bridge over stdio and over Streamable HTTP,
# fronting the reference testee: server/discover, tools/list, tools/call, subscriptions/listen
# with a tool list change, and a sampling answer through MRTR (mcp_python_modern.py).
#
# Usage: tests/clients/run-python-modern.sh path/to/protomcp-conform [stdio|http|both]
# Exit status: 0 every step passed; 1 a step failed; 2 usage.
# The venv is shared with run.sh (the same pinned package); pip is idempotent.
set -euo pipefail
exec </dev/null
bin=$(realpath "${1:?usage: run-python-modern.sh path/to/protomcp-conform [stdio|http|both]}")
venv=${MCP_CLIENT_VENV:-target/mcp-client-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q 'mcp==2.3.0'
echo "python-modern: $("$venv/bin/python" -c 'import importlib.metadata as m; print("mcp", m.version("mcp"))')"
# The script bounds every step itself (15 s each); the outer bound catches anything else.
timeout 300 "$venv/bin/python" "$(dirname "$0")/mcp_python_modern.py" "$bin" "${2:-both}"
