"""Running a coroutine to completion on the bench's own event loop (``clock.new_event_loop``), as the
bench does, so reads get the same time stamps as in a real run."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

from perflab.bench.clock import new_event_loop

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    loop = new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()
