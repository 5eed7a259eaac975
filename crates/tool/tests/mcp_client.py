"""A real MCP client (the official Python SDK, `mcp` on PyPI) driving the tool binaries'
MCP servers over stdio, for `crates/tool/tests/mcp.rs`, and over Streamable HTTP, for
`crates/tool/tests/mcp_http.rs`.

Reads a plan (JSON) on stdin:

    {"sessions": [{"label": str, "command": str, "args": [str], "env": {str: str},
                   (or, over Streamable HTTP: "url": str, "headers": {str: str} | null,
                    "ca_file": str | null, "expect_refusal": bool | null)
                   "version": "2025-06-18" | "2025-11-25" | "2026-07-28",
                   "start_after_ms": int | null,
                   "steps": [{"label": str, "tool": str, "arguments": {...},
                              "rename_before": [from, to] | null,
                              "meta": {str: ...} | null}
                             | {"label": str, "parallel": [step, ...]}]}],
     "concurrent": bool | null}

Each session starts one server process (`mcp.client.stdio.stdio_client`), or connects
to a running server at `url` (`mcp.client.streamable_http.streamable_http_client`, with
`headers` sent on every request and, for an `https` URL, the server's certificate
verified against `ca_file` only), negotiates
the session's protocol version with `ClientSession` (2025-06-18 by an `initialize`
proposing it, 2025-11-25 by the SDK's own `initialize`, 2026-07-28 by the SDK's
`server/discover`), lists the tools and runs the steps in order in that one process.
The SDK validates every result against the negotiated revision's schema and every
non-error result's `structuredContent` against the tool's `outputSchema`; error
results are validated against it too, with the SDK's own `validate_tool_result`.
A step whose request fails at the protocol level is recorded as such and the session
goes on. `meta` is sent as the request's `_meta` (a W3C `traceparent`, for instance).
`rename_before` renames a file before the step (the runtime context changing
between calls of one server). A `parallel` step sends its steps at once in the one
session and records each when it answers. With `concurrent`, the sessions run at once
(each after its `start_after_ms`), not one after another. Every call step records its
`elapsed_ms`, from sending the request to its answer.

A session with `expect_refusal` is one the server is expected to refuse at the HTTP
level: its failure (whatever the SDK raises, within 20 s) is recorded as `refused`, the
exception's text, instead of failing the client.

Writes one JSON document on stdout: per session the negotiated version, the listed
tools as sent, and per step either the result as the SDK parsed it (`content`,
`structuredContent`, `isError`, `resultType`) or the protocol error.
"""

import json
import os
import sys
import time

import contextlib
import ssl

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import (
    MCP_DEFAULT_SSE_READ_TIMEOUT,
    MCP_DEFAULT_TIMEOUT,
    create_mcp_http_client,
)
from mcp.shared.exceptions import MCPError

CLIENT = types.Implementation(name="evidence-tool-tests", version="1")


async def negotiate(session: ClientSession, version: str) -> None:
    if version == "2026-07-28":
        await session.discover()
    elif version == "2025-11-25":
        await session.initialize()
    else:
        # The SDK's initialize proposes its newest handshake version; this proposes
        # `version` through the same request type and adopts the answer the same way.
        result = await session.send_request(
            types.InitializeRequest(
                params=types.InitializeRequestParams(
                    protocol_version=version,
                    capabilities=types.ClientCapabilities(),
                    client_info=CLIENT,
                )
            ),
            types.InitializeResult,
        )
        session.adopt(result)
        await session.send_notification(types.InitializedNotification())


async def run_parallel(session: ClientSession, step: dict) -> dict:
    results = [None] * len(step["parallel"])

    async def one(i: int, inner: dict) -> None:
        results[i] = await run_step(session, inner)

    async with anyio.create_task_group() as group:
        for i, inner in enumerate(step["parallel"]):
            group.start_soon(one, i, inner)
    return {"label": step["label"], "parallel": results}


async def run_step(session: ClientSession, step: dict) -> dict:
    if "parallel" in step:
        return await run_parallel(session, step)
    if step.get("rename_before"):
        source, target = step["rename_before"]
        os.rename(source, target)
    sent = time.monotonic()
    try:
        result = await session.call_tool(step["tool"], step["arguments"], meta=step.get("meta"))
    except MCPError as e:
        return {
            "label": step["label"],
            "elapsed_ms": round((time.monotonic() - sent) * 1000),
            "protocol_error": {"code": e.error.code, "message": e.error.message},
        }
    elapsed_ms = round((time.monotonic() - sent) * 1000)
    if result.is_error:
        # The SDK checks only successful results on its own; failures carry details too.
        await session.validate_tool_result(step["tool"], result)
    return {
        "label": step["label"],
        "elapsed_ms": elapsed_ms,
        "isError": result.is_error,
        "resultType": getattr(result, "result_type", None),
        "content": [block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in result.content],
        "structuredContent": result.structured_content,
    }


@contextlib.asynccontextmanager
async def transport(plan: dict):
    if "url" in plan:
        headers = plan.get("headers") or None
        if plan.get("ca_file"):
            # The SDK's client with its timeouts, verifying against the one CA given.
            http = httpx2.AsyncClient(
                headers=headers,
                timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
                verify=ssl.create_default_context(cafile=plan["ca_file"]),
            )
        else:
            http = create_mcp_http_client(headers=headers)
        async with http:
            async with streamable_http_client(plan["url"], http_client=http) as streams:
                yield streams
    else:
        params = StdioServerParameters(command=plan["command"], args=plan["args"], env=plan["env"])
        async with stdio_client(params) as streams:
            yield streams


def text_of(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(text_of(e) for e in error.exceptions)
    return f"{type(error).__name__}: {error}"


async def run_session(plan: dict) -> dict:
    if plan.get("start_after_ms"):
        await anyio.sleep(plan["start_after_ms"] / 1000)
    if plan.get("expect_refusal"):
        try:
            with anyio.fail_after(20):
                served = await serve_session(plan)
        except BaseException as error:  # noqa: BLE001 - the refusal is what is recorded
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                raise
            return {"label": plan["label"], "refused": text_of(error)}
        return served
    return await serve_session(plan)


async def serve_session(plan: dict) -> dict:
    async with transport(plan) as (read, write):
        async with ClientSession(read, write, client_info=CLIENT) as session:
            await negotiate(session, plan["version"])
            listed = await session.list_tools()
            tools = [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in listed.tools]
            steps = [await run_step(session, step) for step in plan["steps"]]
            return {
                "label": plan["label"],
                "negotiated": session.protocol_version,
                "tools": tools,
                "steps": steps,
            }


async def main() -> None:
    plan = json.load(sys.stdin)
    if plan.get("concurrent"):
        sessions = [None] * len(plan["sessions"])

        async def one(i: int, session: dict) -> None:
            sessions[i] = await run_session(session)

        async with anyio.create_task_group() as group:
            for i, session in enumerate(plan["sessions"]):
                group.start_soon(one, i, session)
    else:
        sessions = [await run_session(session) for session in plan["sessions"]]
    json.dump({"sessions": sessions}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    anyio.run(main)
