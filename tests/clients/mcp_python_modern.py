"""A second published modern MCP client, the `mcp` Python package's high-level `Client` (pinned
in run-python-modern.sh), drives the reference bridge in front of the reference testee over stdio
and over Streamable HTTP, speaking MCP 2026-07-28 (the stateless revision).

Per transport, each step printed as it passes:

  connect   Client(mode="auto") probes server/discover at its newest modern version and falls
            back to initialize otherwise; the version it settles on must be 2026-07-28
  list      tools/list: echo, toggle and ask listed, the hidden tool secret not
  call      tools/call echo returns its text; tools/call fail_soft is an isError result
  listen    Client.listen(tools_list_changed=True) is acknowledged; tools/call toggle
            {enable: true} makes the testee enable secret, and a ToolsListChanged event must
            arrive on the listen stream; tools/list then lists secret
  mrtr      tools/call ask: the testee sends a SamplingRequest; a bridge serving 2026-07-28
            answers with an InputRequiredResult, which the client answers through its
            sampling_callback and a retry; the result must be the callback's answer, asked once

Usage: python mcp_python_modern.py /path/to/protomcp-conform [stdio|http|both]
Exit status 0 when every step passes; 1 with the failing step otherwise. Every wait is bounded,
and every bridge runs in a process group of its own that is ended at the end.
"""

import asyncio
import os
import re
import select
import signal
import subprocess
import sys
import time

import mcp_types as types
from mcp import StdioServerParameters
from mcp.client.client import Client

WANT_VERSION = "2026-07-28"
MODEL_ANSWER = "42, says the Python client's model"
STEP_TIMEOUT = 15.0


def step(transport: str, name: str, what: str) -> None:
    print(f"python-modern: {transport}: {name}: {what}", flush=True)


class Failed(Exception):
    pass


def check(cond: bool, what: str) -> None:
    if not cond:
        raise Failed(what)


async def session(transport: str, server) -> None:
    asked: list[str] = []

    async def sampling(_context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(str(params.messages[0].content))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=MODEL_ANSWER),
            model="python-client-model",
        )

    client = Client(server, mode="auto", sampling_callback=sampling, read_timeout_seconds=STEP_TIMEOUT)
    async with asyncio.timeout(STEP_TIMEOUT):
        await client.__aenter__()
    try:
        check(client.protocol_version == WANT_VERSION, f"connect: negotiated {client.protocol_version!r}, want {WANT_VERSION}")
        step(transport, "connect", f"{client.protocol_version} through server/discover")

        async def names() -> list[str]:
            async with asyncio.timeout(STEP_TIMEOUT):
                listed = await client.list_tools()
            return sorted(t.name for t in listed.tools)

        listed = await names()
        check({"echo", "toggle", "ask"} <= set(listed) and "secret" not in listed, f"list: {listed}")
        step(transport, "list", ", ".join(listed))

        async with asyncio.timeout(STEP_TIMEOUT):
            echo = await client.call_tool("echo", {"text": "hello from python, modern"})
        check(not echo.is_error and echo.content[0].text == "hello from python, modern", f"call: echo gave {echo}")
        async with asyncio.timeout(STEP_TIMEOUT):
            soft = await client.call_tool("fail_soft", {})
        check(soft.is_error is True, f"call: fail_soft gave {soft}")
        step(transport, "call", "echo, fail_soft (isError)")

        async with asyncio.timeout(STEP_TIMEOUT):
            listen = client.listen(tools_list_changed=True)
            sub = await listen.__aenter__()
        try:
            step(transport, "listen", "acknowledged")
            async with asyncio.timeout(STEP_TIMEOUT):
                toggled = await client.call_tool("toggle", {"enable": True})
            check(not toggled.is_error, f"listen: toggle gave {toggled}")
            async with asyncio.timeout(STEP_TIMEOUT):
                event = await anext(aiter(sub))
            check(type(event).__name__ == "ToolsListChanged", f"listen: the first event is {event!r}")
            # The client's cache honours ttlMs; the list change evicts it, so this is a fresh list.
            after = await names()
            check("secret" in after, f"listen: secret not listed after the change: {after}")
            step(transport, "listen", "ToolsListChanged after toggle; secret now listed")
        finally:
            async with asyncio.timeout(STEP_TIMEOUT):
                await listen.__aexit__(None, None, None)

        async with asyncio.timeout(STEP_TIMEOUT):
            answer = await client.call_tool("ask", {"question": "What is 6 x 7?"})
        text = answer.content[0].text if answer.content else None
        check(not answer.is_error and text == MODEL_ANSWER, f"mrtr: ask gave {answer}")
        check(len(asked) == 1, f"mrtr: the sampling callback ran {len(asked)} times, want once")
        step(transport, "mrtr", f"ask answered {text!r} through InputRequiredResult and a retry")
    finally:
        async with asyncio.timeout(STEP_TIMEOUT):
            await client.__aexit__(None, None, None)


def start_http(binary: str) -> tuple[subprocess.Popen, str]:
    """Starts the bridge over HTTP on a free port in a process group of its own; returns it and
    the URL it prints once its tool process is ready."""
    bridge = subprocess.Popen(
        [binary, "bridge", "--transport", "http", "--host", "127.0.0.1", "--port", "0", "--call-timeout", "5s",
         "--", binary, "testee"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
    )
    assert bridge.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([bridge.stderr], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = bridge.stderr.readline()
        if not line:
            end_group(bridge)
            raise Failed("connect: the bridge exited before listening")
        sys.stderr.write(line)
        m = re.match(r"protomcp-conform bridge: listening on (\S+)", line)
        if m:
            return bridge, m.group(1)
    end_group(bridge)
    raise Failed("connect: the bridge did not print its address within 30 s")


def end_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


async def main(binary: str, which: str) -> int:
    failed = 0
    if which in ("stdio", "both"):
        params = StdioServerParameters(command=binary, args=["bridge", "--call-timeout", "5s", "--", binary, "testee"])
        try:
            await session("stdio", params)
        except (Failed, TimeoutError, Exception) as e:  # noqa: BLE001 - every failure is reported
            print(f"python-modern: stdio: FAILED: {type(e).__name__}: {e}", flush=True)
            failed = 1
    if which in ("http", "both"):
        bridge = None
        drain = None
        try:
            bridge, url = start_http(binary)
            # Keep draining the bridge's stderr so it never blocks on a full pipe.
            loop = asyncio.get_running_loop()
            drain = loop.run_in_executor(None, lambda: [sys.stderr.write(line) for line in bridge.stderr])
            await session("http", url)
        except (Failed, TimeoutError, Exception) as e:  # noqa: BLE001
            print(f"python-modern: http: FAILED: {type(e).__name__}: {e}", flush=True)
            failed = 1
        finally:
            if bridge is not None:
                end_group(bridge)
            if drain is not None:
                try:
                    await asyncio.wait_for(drain, 5)
                except Exception:  # noqa: BLE001 - the reader ends with the bridge
                    pass
    return failed


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else "both")))
