"""The baseline's extension: the same control operations, the plain SDK way, without agent_meta.

``baseline_boot/sitecustomize.py`` (first on the baseline agent's ``PYTHONPATH``) calls
:func:`install`, which waits for the agent to import the SDK and then wraps
``AgentSideConnection.__init__`` to learn the connection; the agent is otherwise unchanged and
agent_meta is never imported. Each operation becomes what an extension author can do with the
SDK alone: ``conn.session_update(session_id, SessionInfoUpdate(...))`` (on SDK 0.6, which has
neither, the notification written through the connection's own sender).

It keeps its own copy of what it published (its domain values, its failure incident), so that
domain edits send the whole value of their key and a late resolution is refused, as an author
would write it; what differs from agent_meta is then only what the SDK and the v1 wire do.
Worker-thread publications go through ``asyncio.run_coroutine_threadsafe``, one at a time.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import importlib.machinery
import sys
from typing import TYPE_CHECKING, Any, Final

from integration.thirdparty import control
from integration.thirdparty.control import burst_updates

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from types import ModuleType

FAILURE_KEY: Final = "agent-meta"
"""The failure record goes where agent_meta's default ``failure_path`` puts it."""


def _edit(value: Any, path: Sequence[str], new: Any, remove: bool) -> Any:
    root = dict(value) if isinstance(value, dict) else {}
    node = root
    for step in path[:-1]:
        child = node.get(step)
        node[step] = child = dict(child) if isinstance(child, dict) else {}
        node = child
    if remove:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = new
    return root


class PlainBackend:
    """The control operations on the SDK's own connection."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._loop = asyncio.get_running_loop()
        self._domains: dict[tuple[str, str], Any] = {}
        self._failures: dict[str, tuple[str, int]] = {}

    async def _send(self, session: str, **fields: Any) -> bool:
        from acp import schema

        if not hasattr(schema, "SessionInfoUpdate"):
            return await self._send_by_hand(session, **fields)
        update = schema.SessionInfoUpdate(session_update="session_info_update", **fields)
        await self._connection.session_update(session_id=session, update=update)
        return True

    async def _send_by_hand(self, session: str, **fields: Any) -> bool:
        """SDK 0.6 (box-agent) has no ``SessionInfoUpdate`` nor ``session_update``: an author
        writes the notification through the connection's own JSON-RPC sender, leaving out
        ``None`` as the later releases' serializer does (a clear is then no ``_meta``)."""
        names = {"field_meta": "_meta", "title": "title", "updated_at": "updatedAt"}
        update = {"sessionUpdate": "session_info_update"}
        update |= {names[k]: v for k, v in fields.items() if v is not None}
        params = {"sessionId": session, "update": update}
        await self._connection._conn.send_notification("session/update", params)
        return True

    async def run(
        self, op: str, args: dict[str, Any], emit: Callable[[Any], Awaitable[None]]
    ) -> Any:
        session = args.get("session", "")
        if op == "publish":
            fields = {"field_meta": args["meta"]} if "meta" in args else {}
            if "title" in args:
                fields["title"] = args["title"]
            return await self._send(session, **fields)
        if op in ("domain_set", "domain_remove"):
            key = args["key"]
            value = _edit(
                self._domains.get((session, key)),
                args["path"],
                args.get("value"),
                op == "domain_remove",
            )
            self._domains[session, key] = value
            return await self._send(session, field_meta={key: value})
        if op == "report_failure":
            incident, revision = args["incident"], args["revision"]
            current = self._failures.get(session)
            if current is not None and current[0] == incident and current[1] > revision:
                return False
            self._failures[session] = (incident, revision)
            return await self._send(session, field_meta={FAILURE_KEY: {"failure": args["record"]}})
        if op == "resolve_failure":
            if self._failures.get(session) != (args["incident"], args["revision"]):
                return False
            del self._failures[session]
            return await self._send(session, field_meta={FAILURE_KEY: None})
        if op == "burst":
            return await self._burst(session, burst_updates(args["count"], args["pad"]))
        raise NotImplementedError(f"{op}: the plain SDK has nothing of the kind")

    async def _burst(self, session: str, updates: list[dict[str, Any]]) -> int:
        loop = self._loop

        def work() -> int:
            for meta in updates:
                sent = self._send(session, field_meta=meta)
                asyncio.run_coroutine_threadsafe(sent, loop).result()
            return len(updates)

        return await asyncio.to_thread(work)


def _patch() -> None:
    from acp.agent.connection import AgentSideConnection

    original = AgentSideConnection.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        control.start(PlainBackend(self))

    AgentSideConnection.__init__ = init  # type: ignore[method-assign]


class _SdkFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: once ``acp`` has been imported, the connection is wrapped."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "acp":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        _patch()


def install() -> None:
    """Wrap the SDK's connection as soon as the agent imports the SDK."""
    if "acp" in sys.modules:
        _patch()
    else:
        sys.meta_path.insert(0, _SdkFinder())
