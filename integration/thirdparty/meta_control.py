"""An extension that publishes into an agent it did not write, driven by the test.

``agent-meta run --import integration.thirdparty.meta_control -- AGENT_CMD`` imports it into
the unchanged agent's process. It registers an :func:`agent_meta.sdk.on_connection` hook: for
the connection ``agent-meta run`` starts, it serves the test's control channel
(:mod:`integration.thirdparty.control`) and carries each operation out on the connection's
adapter, through ``adapter.lifetime(sid)`` on the agent's loop or ``adapter.threadsafe`` from a
worker thread, answering once the owner has taken it. The glue launchers (the five-line
adoption) call :func:`attach` with their adapter instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import TYPE_CHECKING, Any, Final

from agent_meta import OMITTED
from agent_meta.sdk import SdkAdapter, on_connection
from integration.thirdparty import control
from integration.thirdparty.control import burst_updates

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agent_meta import SessionLifetime

TICK_LIMIT: Final = 1_000_000
"""``tick_until_fenced`` stops here at the latest (a test that never stops it)."""


class MetaBackend:
    """The control operations on an agent_meta adapter."""

    def __init__(self, adapter: SdkAdapter) -> None:
        self._adapter = adapter
        self._lifetimes: dict[str, SessionLifetime] = {}
        self._stop = threading.Event()

    def _lifetime(self, session: str) -> SessionLifetime:
        """The session's lifetime handle, kept as an extension keeps it: once the lifetime has
        ended (``session/close``), its calls answer ``False`` (fenced)."""
        if session not in self._lifetimes:
            self._lifetimes[session] = self._adapter.lifetime(session)
        return self._lifetimes[session]

    async def run(
        self, op: str, args: dict[str, Any], emit: Callable[[Any], Awaitable[None]]
    ) -> Any:
        if op == "tick_until_fenced":
            return await self._tick_until_fenced(args["session"], emit)
        if op == "stop_ticking":
            self._stop.set()
            return True
        if op == "statistics":
            return dataclasses.asdict(self._adapter.statistics())
        lifetime = self._lifetime(args["session"])
        if op == "publish":
            fields = {name: args[name] for name in ("meta", "title") if name in args}
            return await lifetime.publish(**fields)
        if op == "domain_set":
            return await lifetime.domain(args["key"]).set(args["path"], args["value"])
        if op == "domain_remove":
            return await lifetime.domain(args["key"]).remove(args["path"])
        if op == "report_failure":
            return await lifetime.report_failure(args["incident"], args["revision"], args["record"])
        if op == "resolve_failure":
            return await lifetime.resolve_failure(args["incident"], args["revision"])
        if op == "burst":
            return await self._burst(args["session"], burst_updates(args["count"], args["pad"]))
        if op == "snapshot":
            info = lifetime.snapshot()
            known = {"title": info.title, "updatedAt": info.updated_at}
            return {"meta": info.meta} | {k: v for k, v in known.items() if v is not OMITTED}
        raise ValueError(f"unknown operation {op!r}")

    async def _burst(self, session: str, updates: list[dict[str, Any]]) -> int:
        """Publish every update from a worker thread, in order; how many were accepted."""
        threadsafe = self._adapter.threadsafe

        def work() -> int:
            futures = [threadsafe.publish(session, meta=meta) for meta in updates]
            return sum(future.result() for future in futures)

        return await asyncio.to_thread(work)

    async def _tick_until_fenced(
        self, session: str, emit: Callable[[Any], Awaitable[None]]
    ) -> dict[str, Any]:
        """Publish ``{"tick": n}`` from a worker thread until the lifetime refuses it, or until
        ``stop_ticking``: a publication made after the stop (sent once the client has the close
        response) must be refused; if it is accepted, the answer says ``fenced: False``."""
        lifetime = self._lifetime(session)
        threadsafe = self._adapter.threadsafe
        loop = asyncio.get_running_loop()
        started = asyncio.Event()
        self._stop.clear()

        def work() -> dict[str, Any]:
            accepted = 0
            while accepted < TICK_LIMIT:
                stopping = self._stop.is_set()
                if not threadsafe.publish(lifetime, meta={"tick": accepted + 1}).result():
                    return {"accepted": accepted, "fenced": True}
                accepted += 1
                if accepted == 1:
                    loop.call_soon_threadsafe(started.set)
                if stopping:  # published after the stop, so after the close: not fenced
                    break
            return {"accepted": accepted, "fenced": False}

        ticking = asyncio.ensure_future(asyncio.to_thread(work))
        waiting = asyncio.ensure_future(started.wait())
        await asyncio.wait({ticking, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if started.is_set():
            await emit("started")
        waiting.cancel()
        return await ticking


def attach(adapter: SdkAdapter) -> bool:
    """Serve the test's control channel on ``adapter`` (when the test asked for one)."""
    return control.start(MetaBackend(adapter))


def _hook(adapter: SdkAdapter, connection: Any) -> None:
    attach(adapter)


on_connection(_hook)
