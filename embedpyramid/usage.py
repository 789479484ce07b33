"""Resource usage of a block of work: the peak resident set size of the process.

Shared by the encoders (peak RSS of an encode) and level L4 (peak RSS of an index build), so the
two are measured the same way.
"""

from __future__ import annotations

import resource
import sys
import threading
import time

import psutil

# The sampling interval: a hundredth of the block's time so far, between 5 ms and 0.2 s. A poll
# takes CPU from the block's own threads, so a long block is polled less often; its peak recurs
# (every batch of an encode reaches it), and a short one keeps the fine interval.
_RSS_POLL_MIN_SECONDS = 0.005
_RSS_POLL_MAX_SECONDS = 0.2
_RSS_POLL_FRACTION = 0.01
# ru_maxrss is in KiB on Linux and in bytes on macOS.
_MAXRSS_UNIT = 1 if sys.platform == "darwin" else 1024


class PeakRss:
    """Peak resident set size over a ``with`` block: sampled by a thread (native code such as
    FAISS or torch releases the GIL) at an interval that grows with the block's time (5 ms at
    first, at most 0.2 s), and exact when the block raises the process's lifetime peak
    (``ru_maxrss``). ``start_bytes`` is the RSS when the block began."""

    def __init__(self) -> None:
        self.peak_bytes = 0
        self.start_bytes = 0
        self._stop = threading.Event()
        self._process = psutil.Process()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._lifetime_before = 0

    def _poll(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._process.memory_info().rss)
            elapsed = time.monotonic() - started
            self._stop.wait(min(_RSS_POLL_MAX_SECONDS, max(_RSS_POLL_MIN_SECONDS, _RSS_POLL_FRACTION * elapsed)))

    def __enter__(self) -> PeakRss:
        self._lifetime_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.start_bytes = self.peak_bytes = self._process.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        lifetime_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.peak_bytes = max(self.peak_bytes, self._process.memory_info().rss)
        if lifetime_after > self._lifetime_before:
            self.peak_bytes = max(self.peak_bytes, lifetime_after * _MAXRSS_UNIT)

    @property
    def increase_bytes(self) -> int:
        """How far the block raised the RSS above where it started."""
        return max(0, self.peak_bytes - self.start_bytes)
