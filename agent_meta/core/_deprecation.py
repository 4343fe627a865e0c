"""Renamed keyword parameters, accepted with a ``DeprecationWarning`` for one release."""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, ParamSpec, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["renamed_keywords"]

P = ParamSpec("P")
R = TypeVar("R")


def renamed_keywords(**renamed: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Accept each old keyword (``old="new"``) as the new one, warning that it is deprecated.
    The signature type checkers see is the new one only."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            for old, new in renamed.items():
                if old in kwargs:
                    warnings.warn(
                        f"{function.__qualname__}({old}=...) is deprecated and goes in the next "
                        f"release: use {new}=...",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return call

    return decorate
