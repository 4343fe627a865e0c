"""Section 6: what ``agent-meta run`` adds to an agent's start-up.

The same unchanged SDK agent (``tests.support.sdk_mini_agent plain``) is started directly and
under ``agent-meta run``, alternately, ``repeats`` times each; each start is timed from the
process's creation to the client having read the ``initialize`` answer. The median of each is
kept (a start-up's first run pays the file cache, later ones do not).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

from ._common import ROOT, Row, child_env, verdict

AGENT = [sys.executable, "-m", "tests.support.sdk_mini_agent", "plain"]
SUPERVISED = [sys.executable, "-m", "agent_meta", "run", "--", *AGENT]
INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'


def time_to_initialize(command: list[str]) -> float:
    """Seconds from starting ``command`` to reading its answer to ``initialize``."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=child_env()
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(INITIALIZE)
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    elapsed = time.perf_counter() - started
    process.stdin.close()
    process.stdout.close()
    if process.wait() != 0 or answer.get("id") != 1 or "result" not in answer:
        raise RuntimeError(f"{command} did not answer initialize: {answer}")
    return elapsed


def rows(repeats: int) -> list[Row]:
    direct: list[float] = []
    supervised: list[float] = []
    for _ in range(repeats):
        direct.append(time_to_initialize(AGENT))
        supervised.append(time_to_initialize(SUPERVISED))
    alone, under = statistics.median(direct), statistics.median(supervised)
    added = (under - alone) * 1000
    section = "6 agent-meta run start-up"
    return [
        Row(section, "the agent alone, to its initialize answer", f"{alone * 1000:.0f} ms"),
        Row(section, "the same under agent-meta run", f"{under * 1000:.0f} ms"),
        Row(
            section,
            "added by agent-meta run",
            f"{added:.0f} ms",
            "<= 150 ms",
            verdict(added <= 150),
        ),
    ]
