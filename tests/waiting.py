"""Polling helper shared by the tests that watch processes and files appear or go away."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def until(predicate: Callable[[], Any], seconds: float = 120.0, interval: float = 0.1) -> Any:
    """The first truthy value of ``predicate()`` within ``seconds``; AssertionError otherwise."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"not within {seconds} s")
