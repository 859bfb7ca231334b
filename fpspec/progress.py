"""Progress of long runs (reveal over a range, inference, verify, audit, survey).

Library stages say which phase they are in and how far along it they are; they
never print.  Whoever runs them installs a sink with `reporting(sink)` (the
command line shows a progress bar on a terminal and nothing when piped).
Without a sink a report is one function call, so stages report freely.

    with phase("reveal at sample n", total=len(ns)) as advance:
        for n in ns:
            ...
            advance()
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Protocol


class Sink(Protocol):
    def start(self, name: str, total: int | None) -> None: ...
    def advance(self, name: str, steps: int) -> None: ...
    def finish(self, name: str) -> None: ...


_sink: Sink | None = None


@contextmanager
def reporting(sink: Sink | None) -> Iterator[None]:
    global _sink
    previous, _sink = _sink, sink
    try:
        yield
    finally:
        _sink = previous


@contextmanager
def phase(name: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    sink = _sink
    if sink is None:
        yield _ignore
        return
    sink.start(name, total)

    def advance(steps: int = 1) -> None:
        sink.advance(name, steps)

    try:
        yield advance
    finally:
        sink.finish(name)


def _ignore(steps: int = 1) -> None:
    return None


# the running work's time limit, for sinks that show the time left: (its end in
# time.monotonic(), its length in seconds), or None
_limit: tuple | None = None


@contextmanager
def time_limit(until: float | None, seconds: float | None = None) -> Iterator[None]:
    """While active, time_left() counts down to time.monotonic() = until (None: no
    limit) and limit_seconds() is the limit's length."""
    global _limit
    previous, _limit = _limit, None if until is None else (until, seconds)
    try:
        yield
    finally:
        _limit = previous


def time_left() -> float | None:
    """Seconds left of the running work's time limit, or None without one."""
    if _limit is None:
        return None
    import time

    return _limit[0] - time.monotonic()


def limit_seconds() -> float | None:
    """The running work's time limit in seconds, where it was given."""
    return None if _limit is None else _limit[1]
