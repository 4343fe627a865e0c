"""``agent-meta agent``'s serving: the reference agent on stdio on trio (with or without
``--store``), on the official SDK on stdio (asyncio), and on the SDK for remote clients
(``--listen``: WebSocket and streamable HTTP, behind a bearer token), until the client ends or a
signal stops it.

Nothing heavy is imported with this module (the command line imports it to build its help):
trio, asyncio, the SDK, the stores and the agents are imported by the runtime that needs them.
A missing extra is said on stderr with what to install (exit 2); an owner or store failure ends
the run with status 1.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import TYPE_CHECKING

from agent_meta import AgentMetaError

from .._agent_command import not_a_pipe
from .._tokens import TOKEN_VARIABLE, read_token

if TYPE_CHECKING:
    import argparse
    from collections.abc import Awaitable, Callable

    from agent_meta import OwnerOptions

__all__ = ["DRAIN_TIMEOUT", "SDK_V1_ONLY", "TOKEN_VARIABLE", "run_sdk", "run_trio"]

DRAIN_TIMEOUT = 10.0
"""Seconds ``agent-meta agent`` waits at exit for queued frames to be written, once the work
has ended (on a signal, within the stop's own bound of 15 s: see ``AgentConnection.shutdown``);
frames still unwritten then make it exit with status 1."""

"""The environment variable ``--listen`` reads the bearer token from (without ``--token-file``)."""

SDK_V1_ONLY = (
    "the official Python SDK before 1.0 speaks ACP v1 only "
    "(ACP v2 needs agent-client-protocol 1.0 or later: acp.experimental.v2)"
)
"""Why ``--runtime sdk`` takes no ``--protocol 2`` on an SDK release without the v2 API."""


def run_trio(args: argparse.Namespace, versions: tuple[int, ...], options: OwnerOptions) -> int:
    """``agent-meta agent`` (``--runtime trio``): the reference agent on agent_meta's own
    connection over stdio, its lifetimes and history in ``--store`` when given."""
    from agent_meta import run_stdio_agent

    from .reference_agent._agent import ReferenceAgent

    try:
        if args.store is None:
            run_stdio_agent(
                ReferenceAgent,
                protocol_versions=versions,
                max_line_bytes=args.max_line,
                options=options,
            )
        else:
            import trio

            trio.run(_serve_with_store, args.store, versions, args.max_line, options)
    except (AgentMetaError, ExceptionGroup) as exc:
        _stopped(exc)
        return 1
    return 0


async def _serve_with_store(
    url: str, versions: tuple[int, ...], max_line: int, options: OwnerOptions
) -> None:
    from agent_meta import open_store, serve_stdio

    from .reference_agent._agent import ReferenceAgent

    async with open_store(url) as store:
        agent = await ReferenceAgent.with_store(store)
        await serve_stdio(
            agent,
            protocol_versions=versions,
            max_line_bytes=max_line,
            options=options,
            store=store,
            handle_signals=True,
        )


def run_sdk(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    versions: tuple[int, ...],
    options: OwnerOptions,
) -> int:
    """``agent-meta agent --runtime sdk``: the reference agent on the official SDK (asyncio):
    ACP v1 on any supported release, v2 on 1.0 (``auto``: the one the client asks for)."""
    too_old = _sdk_too_old_for_the_reference_agent()
    if too_old is not None:
        print(too_old, file=sys.stderr)
        return 2
    from .._install_hint import import_extra

    sdk_agent = import_extra(
        "agent_meta.agents.sdk_agent._serve",
        "agent-meta agent --runtime sdk needs the official ACP Python SDK",
        "sdk",
    )
    if sdk_agent is None:
        return 2
    offered = _sdk_protocol_versions()
    protocols = tuple(v for v in versions if v in offered)
    if not protocols:
        parser.error(f"--protocol {args.protocol} with --runtime sdk: {SDK_V1_ONLY}")
    if args.listen is not None:
        return _run_listening(parser, args, options)
    if (problem := not_a_pipe()) is not None:
        print(
            f"agent-meta agent --runtime sdk: {problem}; asyncio's pipe transports take pipes, "
            "sockets and terminals only (run it under a client, or use the trio runtime)",
            file=sys.stderr,
        )
        return 2
    # The owner follows the version initialize answers; it starts at the one served alone.
    options = dataclasses.replace(options, protocol_version=2 if protocols == (2,) else 1)
    import asyncio

    serve = functools.partial(sdk_agent.serve_sdk_agent, protocols=protocols)
    try:
        asyncio.run(_serve_sdk(serve, args.store, args.max_line, options))
    except (AgentMetaError, ExceptionGroup) as exc:
        _stopped(exc)
        return 1
    return 0


def _sdk_too_old_for_the_reference_agent() -> str | None:
    """Why the installed SDK cannot run the reference agent, if it cannot: the adapter serves
    0.6 on, the reference agent is written against the API of 0.7.1 on (``run_agent``,
    ``SessionInfoUpdate``, resume). A missing SDK is reported where the agent is imported."""
    try:
        from ..sdk._release import installed_release

        release = installed_release()
    except ImportError:
        return None
    if release.runs_agent and release.session_info:
        return None
    return (
        "agent-meta agent --runtime sdk needs agent-client-protocol 0.7.1 or later (the reference "
        f"agent uses its run_agent and SessionInfoUpdate); {release.version} is installed.\n"
        "Install a later one with: pip install 'agent-client-protocol>=0.7.1'"
    )


def _sdk_protocol_versions() -> tuple[int, ...]:
    """The ACP versions the installed SDK serves (``(1, 2)`` on 1.0, else ``(1,)``)."""
    from .sdk_agent._serve import sdk_protocol_versions

    return sdk_protocol_versions()


async def _serve_sdk(
    serve: Callable[..., Awaitable[None]], url: str | None, max_line: int, options: OwnerOptions
) -> None:
    if url is None:
        await serve(options, max_line_bytes=max_line, handle_signals=True)
        return
    from agent_meta import open_store

    async with open_store(url) as store:
        await serve(
            options, store=store, history=store, max_line_bytes=max_line, handle_signals=True
        )


def _run_listening(
    parser: argparse.ArgumentParser, args: argparse.Namespace, options: OwnerOptions
) -> int:
    """``--listen``: the SDK agent for remote clients (WebSocket and streamable HTTP)."""
    host, port = _listen_address(parser, args.listen)
    token = _bearer_token(parser, args.token_file)
    from .._install_hint import import_extra

    listen = import_extra(
        "agent_meta.agents.sdk_agent._listen",
        "agent-meta agent --listen needs the SDK's HTTP server and an ASGI server "
        "(agent-client-protocol 0.12)",
        "sdk-http",
    )
    if listen is None:
        return 2
    serve = functools.partial(listen.serve_sdk_listen, host, port, token)
    import asyncio

    try:
        asyncio.run(_serve_listening(serve, args.store, options))
    except (AgentMetaError, listen.ListenError, ExceptionGroup) as exc:
        _stopped(exc)
        return 1
    return 0


def _listen_address(parser: argparse.ArgumentParser, text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` as a (host, port) pair; loopback unless a host is named."""
    host, _, port_text = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text, 10)
    except ValueError:
        parser.error(f"--listen {text!r}: expected [HOST:]PORT")
    if not 0 <= port <= 65535:
        parser.error(f"--listen {text!r}: the port must be from 0 to 65535")
    return host, port


def _bearer_token(parser: argparse.ArgumentParser, path: str | None) -> str:
    """The token of ``--token-file`` (its first line), else of the environment, checked as
    ``agent-meta attach`` checks it; the token itself never appears in a message."""
    try:
        return read_token(path)
    except ValueError as exc:
        parser.error(f"--listen: {exc}")


async def _serve_listening(
    serve: Callable[..., Awaitable[None]], url: str | None, options: OwnerOptions
) -> None:
    if url is None:
        await serve(options)
        return
    from agent_meta import open_store

    async with open_store(url) as store:
        await serve(options, store=store, history=store)


def _stopped(exc: BaseException) -> None:
    """Say on stderr what stopped the agent: each exception inside ``exc``."""
    print(f"agent-meta: stopped: {'; '.join(map(repr, _leaves(exc)))}", file=sys.stderr)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, exception groups unwrapped."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
