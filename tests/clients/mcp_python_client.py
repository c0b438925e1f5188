"""A published MCP client (the `mcp` Python package) lists and calls tools through the reference
bridge over stdio, against the reference testee.

Usage: python mcp_python_client.py /path/to/protomcp-conform
Exit status 0 when every check holds; the failing check otherwise.
"""

import asyncio
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(binary: str) -> None:
    params = StdioServerParameters(command=binary, args=["bridge", "--", binary, "testee"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            print("initialized:", init.server_info.name, init.protocol_version)
            tools = await session.list_tools()
            names = sorted(t.name for t in tools.tools)
            print("tools:", ", ".join(names))
            assert "echo" in names and "add" in names, names
            assert "secret" not in names, "the hidden tool is listed"
            echo = await session.call_tool("echo", {"text": "hello from python"})
            assert echo.content[0].text == "hello from python", echo
            add = await session.call_tool("add", {"a": 40, "b": 2})
            assert add.content[0].text == "42", add
            soft = await session.call_tool("fail_soft", {})
            assert soft.is_error, soft
            structured = await session.call_tool("structured", {})
            assert structured.structured_content == {"answer": 42}, structured
            print("calls: echo, add, fail_soft (isError), structured: ok")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
