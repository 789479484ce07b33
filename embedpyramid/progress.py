"""What a person sees while a command works: on a terminal, one live line per step (what it does,
done/total, rate and ETA) redrawn at least every 2 s; when piped, a line at least every 30 s.

The core reports work through :func:`report` (encodes, exact search, bootstrap resamples); it
costs nothing unless a command has made a :class:`ProgressDisplay` current with
:func:`showing`. Runs launched elsewhere (the daemon, the UI) log their progress to Dagster only.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

TERMINAL_SECONDS = 2.0
PIPED_SECONDS = 30.0


@dataclass
class _Work:
    what: str
    done: int
    total: int
    first_done: int
    started: float


class ProgressDisplay:
    """The live line of one command. ``step(label)`` brackets one unit of work (a partition's
    run); :meth:`update` records how far its current piece of work is; a background thread
    redraws (terminal) or prints (piped) so that a person never waits longer than the period
    without a sign of life."""

    def __init__(self, stream: TextIO = sys.stderr, *, terminal: bool | None = None,
                 period: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.stream = stream
        self.terminal = stream.isatty() if terminal is None else terminal
        self.period = period if period is not None else TERMINAL_SECONDS if self.terminal else PIPED_SECONDS
        self.clock = clock
        self._lock = threading.Lock()
        self._label: str | None = None
        self._since = 0.0
        self._work: _Work | None = None
        self._shown = 0.0  # when the last line was drawn or printed
        self._drawn = False  # a terminal line is on screen
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def step(self, label: str) -> Iterator[None]:
        with self._lock:
            self._label, self._since, self._work, self._shown = label, self.clock(), None, self.clock()
        self._wake.clear()
        self._thread = threading.Thread(target=self._beat, name="progress", daemon=True)
        self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._label = None
                self._clear()
            self._wake.set()
            self._thread.join()

    def update(self, what: str, done: int, total: int) -> None:
        with self._lock:
            if self._label is None:
                return
            now = self.clock()
            if self._work is None or self._work.what != what or done < self._work.done:
                self._work = _Work(what, done, total, done, now)
            self._work.done, self._work.total = done, total
            if self.terminal and now - self._shown >= 0.2:  # redraw live, but not per batch
                self._show(now)

    def line(self, text: str) -> None:
        """A line of the command's own log, printed above the live line."""
        with self._lock:
            self._clear()
            print(text, file=self.stream, flush=True)
            if self.terminal and self._label is not None:
                self._show(self.clock())

    def _beat(self) -> None:
        while not self._wake.wait(min(self.period, 0.5)):
            with self._lock:
                now = self.clock()
                if self._label is not None and now - self._shown >= self.period:
                    self._show(now)

    def _show(self, now: float) -> None:
        text = self._text(now)
        if self.terminal:
            width = shutil.get_terminal_size((100, 20)).columns - 1
            self.stream.write("\r\x1b[K" + text[:width])
            self._drawn = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._shown = now

    def _clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def _text(self, now: float) -> str:
        elapsed = now - self._since
        text = f"{self._label}: working, {_duration(elapsed)}"
        work = self._work
        if work is not None:
            text = f"{self._label}: {work.what} {work.done:,}"
            if work.total:
                text += f"/{work.total:,} ({100 * work.done / work.total:.0f}%)"
            seconds = now - work.started
            rate = (work.done - work.first_done) / seconds if seconds > 0 else 0.0
            if rate > 0:
                text += f", {rate:,.0f}/s"
                if work.total > work.done:
                    text += f", ETA {_duration((work.total - work.done) / rate)}"
            text += f" · {_duration(elapsed)}"
        return text


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


_CURRENT: ProgressDisplay | None = None


@contextlib.contextmanager
def showing(display: ProgressDisplay | None) -> Iterator[ProgressDisplay | None]:
    """Make ``display`` the one :func:`report` feeds (None: report nothing) for the block."""
    global _CURRENT
    previous, _CURRENT = _CURRENT, display
    try:
        yield display
    finally:
        _CURRENT = previous


def report(what: str, done: int, total: int) -> None:
    """How far a piece of work is (``total`` 0 when unknown); a no-op unless a display is current."""
    if _CURRENT is not None:
        _CURRENT.update(what, done, total)


@contextlib.contextmanager
def step(label: str) -> Iterator[None]:
    """Bracket one unit of the command's work on the current display (nothing without one)."""
    if _CURRENT is None:
        yield
        return
    with _CURRENT.step(label):
        yield
