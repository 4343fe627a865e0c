"""Shared pytest configuration.

Hypothesis runs with its default example counts but without a per-example deadline: timing
belongs in benchmarks, and a deadline turns a slow CI machine into flaky failures. Select another
registered profile with ``HYPOTHESIS_PROFILE=<name>``.

Async tests that take the ``driver`` fixture run once per owner driver (trio, asyncio) on the
harness of ``tests/drivers.py`` instead of pytest-trio's runner; ``virtual_time`` gives them a
clock that jumps ahead whenever every task is blocked (trio's ``autojump_clock`` on both).
"""

from __future__ import annotations

import functools
import inspect
import os

import pytest
from hypothesis import settings

from tests.drivers import NAMES, Driver, VirtualTime, get
from tests.support.postgres_fixtures import postgres_server, postgres_url  # noqa: F401 (fixtures)

settings.register_profile("default", deadline=None)
settings.register_profile("thorough", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(params=NAMES)
def driver(request: pytest.FixtureRequest) -> Driver:
    """The owner's runtime: an async test that takes it runs once on trio, once on asyncio."""
    return get(request.param)


@pytest.fixture
def virtual_time() -> VirtualTime:
    return VirtualTime()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Async tests that take ``driver`` run on the harness, not on pytest-trio's runner."""
    for item in items:
        if isinstance(item, pytest.Function) and "driver" in item.fixturenames:
            item.own_markers = [m for m in item.own_markers if m.name != "trio"]


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an async ``driver`` test, with its fixtures, on that driver's runtime."""
    driver = pyfuncitem.funcargs.get("driver")
    test = pyfuncitem.obj
    if not isinstance(driver, Driver) or not inspect.iscoroutinefunction(test):
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in inspect.signature(test).parameters}
    autojump = any(isinstance(value, VirtualTime) for value in kwargs.values())
    driver.run(functools.partial(test, **kwargs), autojump=autojump)
    return True
