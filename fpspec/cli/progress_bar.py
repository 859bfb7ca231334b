"""The command line's view of fpspec.progress: a rich bar per running phase on
stderr when stderr is a terminal, nothing when it is piped or redirected.

(Not a command module: fpspec.cli.main installs it around every command.)
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

from fpspec.progress import reporting


class RichSink:
    """Phases as rich progress tasks (nested phases stack); the bars vanish when done."""

    def __init__(self, stream=None):
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
                                 TimeRemainingColumn(), _time_left_column(),
                                 console=Console(file=stream or sys.stderr), transient=True)
        self.tasks: dict = {}       # phase name -> stack of task ids (a phase may nest in itself)
        self.running = False

    def start(self, name: str, total: int | None) -> None:
        if not self.running:
            self.progress.start()
            self.running = True
        self.tasks.setdefault(name, []).append(self.progress.add_task(name, total=total))

    def advance(self, name: str, steps: int) -> None:
        if self.tasks.get(name):
            self.progress.advance(self.tasks[name][-1], steps)

    def finish(self, name: str) -> None:
        if self.tasks.get(name):
            self.progress.remove_task(self.tasks[name].pop())
        if self.running and not any(self.tasks.values()):
            self.progress.stop()
            self.running = False


def _time_left_column():
    """'41 s left of 60 s': the running work's time limit (fpspec.progress.time_limit), counting down."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    from fpspec.progress import limit_seconds, time_left

    class TimeLeft(ProgressColumn):
        def render(self, task) -> Text:
            left, total = time_left(), limit_seconds()
            if left is None:
                return Text("")
            return Text(f"{max(left, 0.0):.0f} s left" + (f" of {total:g} s" if total else ""))
    return TimeLeft()


def wants_bars(stream=None) -> bool:
    """A terminal that shows them: not piped, not TERM=dumb, not FPSPEC_NO_PROGRESS."""
    stream = stream or sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and os.environ.get("TERM") != "dumb" and not os.environ.get("FPSPEC_NO_PROGRESS")


@contextmanager
def progress_bars() -> Iterator[None]:
    """Install a RichSink for the duration of a command when stderr is a terminal."""
    if not wants_bars():
        yield
        return
    sink = RichSink()
    try:
        with reporting(sink):
            yield
    finally:
        if sink.running:
            sink.progress.stop()
