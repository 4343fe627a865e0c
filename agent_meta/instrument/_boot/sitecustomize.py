"""``agent-meta run`` puts this directory first on the agent's ``PYTHONPATH``: Python imports
this module at start-up, before the agent's code (see :mod:`agent_meta.instrument._install`).

It must work in any Python the agent runs on, even one where agent_meta cannot be imported (it
says so to the supervisor), and it hands over to the ``sitecustomize`` it hides, if any.
"""

import importlib.machinery
import importlib.util
import json
import os
import sys


def _boot() -> None:
    text = os.environ.pop("AGENT_META_RUN", None)  # the agent's own subprocesses are left alone
    if text is None:
        return
    try:
        from agent_meta.instrument._install import RunConfig, install
    except Exception as exc:  # agent_meta is not installed where the agent runs, or broken
        status_fd = json.loads(text)["status_fd"]
        reason = f"agent_meta cannot be imported by the agent's Python ({sys.executable}): {exc}"
        refused = {"event": "refused", "reason": reason, "needs_extra": "sdk"}  # the hint: there
        os.write(status_fd, (json.dumps(refused) + "\n").encode())
        return
    install(RunConfig.from_json(text))


def _chain() -> None:
    """Run the ``sitecustomize`` this one hides (a virtualenv's or a distribution's)."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_boot()
_chain()
