"""Conformance testee for the protomcp Python SDK (PyPI `protomcp`, written against 0.3.1).

Implements the catalogue contract (harness/testees/README.md, spec Appendix B) with the SDK's
public API only, the way its documentation and examples write tool processes. Run it with
PROTOMCP_SOCKET set (protomcp-conform does that); `--middleware` adds the three protocol
middleware of Appendix B.3.

What the SDK's public API cannot express (roots, streams, a resource size) is listed in
protomcp-conform.toml, not worked around here.
"""

import inspect
import json
import sys
import time
from dataclasses import dataclass

import protomcp
from protomcp import (
    CompletionResult,
    PromptArg,
    PromptMessage,
    ResourceContent,
    ToolContext,
    ToolResult,
    completion,
    local_middleware,
    middleware,
    prompt,
    resource,
    resource_template,
    tool,
    tool_manager,
)

# ---------------------------------------------------------------- tools (Appendix B.1)


@tool("Returns its text argument")
def echo(text: str) -> ToolResult:
    return ToolResult(result=text)


@tool("Returns the decimal sum of a and b")
def add(a: int, b: int) -> ToolResult:
    return ToolResult(result=str(a + b))


@tool("Always raises")
def fail() -> ToolResult:
    raise RuntimeError("fixture failure")


@tool("Returns an error result with a ToolError")
def fail_soft() -> ToolResult:
    return ToolResult(
        result="soft failure",
        is_error=True,
        error_code="E_FIXTURE",
        message="soft failure",
        suggestion="retry later",
        retryable=True,
    )


@tool("Takes 100 ms per step, reports progress, stops when cancelled")
def slow(steps: int, ctx: ToolContext) -> ToolResult:
    for i in range(1, steps + 1):
        time.sleep(0.1)
        if ctx.is_cancelled():
            return ToolResult(result="cancelled")
        ctx.report_progress(i, steps, f"step {i}")
    return ToolResult(result=f"done {steps}")


@tool("Returns n x characters")
def big(n: int) -> ToolResult:
    return ToolResult(result="x" * n)


@tool("Returns n x characters as an error result")
def big_err(n: int) -> ToolResult:
    return ToolResult(result="x" * n, is_error=True, error_code="E_BIG", message="big error")


@tool("Enables or disables the secret tool")
def toggle(enable: bool) -> ToolResult:
    if enable:
        return ToolResult(result="ok", enable_tools=["secret"])
    return ToolResult(result="ok", disable_tools=["secret"])


@tool("A hidden tool", hidden=True)
def secret() -> ToolResult:
    return ToolResult(result="secret")


@dataclass
class Answer:
    answer: int = 0


@tool("Returns structured content", output_type=Answer)
def structured() -> ToolResult:
    return ToolResult(structured_content={"answer": 42})


@tool("Logs one message")
def logit() -> ToolResult:
    # The documented logging API (Python guide, "Server Logging").
    protomcp.log.info("fixture log")
    return ToolResult(result="logged")


@tool("Narrows the active tool set to echo and narrow")
def narrow() -> ToolResult:
    active = tool_manager.set_allowed(["echo", "narrow"])
    return ToolResult(result=",".join(active))


@tool("Asks the client's model a question")
def ask(question: str, ctx: ToolContext) -> ToolResult:
    answer = ctx.sample(messages=[{"role": "user", "content": question}], max_tokens=256, timeout=5.0)
    if answer.get("error"):
        return ToolResult(result=f"error: {answer['error']}")
    return ToolResult(result=str(answer.get("content", "")))


# Arguments a tool does not declare are ignored (the contract: the `mirror` middleware adds
# `mw` to every call). The SDK passes every member as a keyword argument, so drop the others.
_HANDLERS = {f.__name__: f for f in (echo, add, fail, fail_soft, slow, big, big_err, toggle, secret,
                                     structured, logit, narrow, ask)}


@local_middleware(priority=1)
def ignore_undeclared_arguments(ctx, tool_name, args, next_handler):
    handler = _HANDLERS.get(tool_name)
    if handler is not None:
        declared = inspect.signature(handler).parameters
        args = {k: v for k, v in args.items() if k in declared}
    return next_handler(ctx, args)


# ---------------------------------------------------------------- resources, prompts, completions (B.2)


@resource(uri="fixture://static", description="A static text", name="static", mime_type="text/plain")
def static_resource(uri: str) -> ResourceContent:
    return ResourceContent(uri=uri, text="static-content", mime_type="text/plain")


@resource_template(uri_template="fixture://item/{id}", description="One item", name="item", mime_type="text/plain")
def item_resource(uri: str) -> ResourceContent:
    item_id = uri[len("fixture://item/"):]
    return ResourceContent(uri=uri, text=f"item {item_id}", mime_type="text/plain")


@resource(uri="fixture://blob", description="Four bytes of binary content", name="blob",
          mime_type="application/octet-stream")
def blob_resource(uri: str) -> ResourceContent:
    return ResourceContent(uri=uri, blob=bytes([0x00, 0xFF, 0x10, 0x80]), mime_type="application/octet-stream")


@resource(uri="fixture://item/0", description="A static resource the item template also matches", name="item-zero",
          mime_type="text/plain")
def item_zero_resource(uri: str) -> ResourceContent:
    return ResourceContent(uri=uri, text="static item zero", mime_type="text/plain")


@resource(uri="fixture://fail", description="A resource whose handler always fails", name="fail", mime_type="text/plain")
def failing_resource(uri: str) -> ResourceContent:
    raise RuntimeError("fixture failure")


@prompt(description="Greets someone", arguments=[PromptArg(name="name", description="who", required=True)])
def greet(name: str, **_undeclared) -> list[PromptMessage]:
    # The SDK passes every member of the arguments object as a keyword; ignore the others.
    return [PromptMessage(role="user", content=f"Hello, {name}!")]


@completion("ref/prompt", "greet", "name")
def complete_greet_name(value: str) -> CompletionResult:
    matches = [c for c in ("alice", "bob", "bobby") if c.startswith(value)]
    return CompletionResult(values=matches, total=len(matches), has_more=False)


@completion("ref/resource", "fixture://item/{id}", "id")
def complete_item_id(value: str) -> CompletionResult:
    matches = [c for c in ("1", "2", "10") if c.startswith(value)]
    return CompletionResult(values=matches, total=len(matches), has_more=False)


def register_failing_prompt():
    # A prompt takes its function's name; `fail` is also a tool, so this one lives in a scope.
    @prompt(description="A prompt whose handler always fails", arguments=[PromptArg(name="x", description="ignored")])
    def fail(x: str = "") -> list[PromptMessage]:
        raise RuntimeError("fixture failure")

    @completion("ref/prompt", "fail", "x")
    def complete_fail_x(value: str) -> CompletionResult:
        raise RuntimeError("fixture failure")


register_failing_prompt()


# ---------------------------------------------------------------- middleware variant (B.3)


def register_protocol_middleware():
    @middleware("guard", priority=1)
    def guard(phase, tool_name, args_json, result_json, is_error):
        if phase == "before" and tool_name == "secret":
            return {"reject": True, "reject_reason": "blocked by guard"}
        return {}

    @middleware("mirror", priority=10)
    def mirror(phase, tool_name, args_json, result_json, is_error):
        if phase == "before":
            args = json.loads(args_json) if args_json else {}
            if not isinstance(args, dict):
                raise ValueError("arguments are not a JSON object")
            args["mw"] = f"before:{tool_name}"
            return {"arguments_json": json.dumps(args)}
        if phase == "after":
            text = f"after:{tool_name}:{'true' if is_error else 'false'}"
            return {"result_json": json.dumps([{"type": "text", "text": text}])}
        return {}

    @middleware("broken", priority=20)
    def broken(phase, tool_name, args_json, result_json, is_error):
        if tool_name == "boom":
            raise RuntimeError("broken middleware fails on boom")
        return {}


if __name__ == "__main__":
    if "--middleware" in sys.argv[1:]:
        register_protocol_middleware()
    from protomcp.runner import run

    run()
