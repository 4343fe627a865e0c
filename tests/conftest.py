"""Shared pytest configuration.

Hypothesis runs with its default example counts but without a per-example deadline: timing
belongs in benchmarks, and a deadline turns a slow CI machine into flaky failures. Select another
registered profile with ``HYPOTHESIS_PROFILE=<name>``.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("default", deadline=None)
settings.register_profile("thorough", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
