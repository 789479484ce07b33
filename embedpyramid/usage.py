"""Resource usage of a block of work: the peak resident set size of the process.

Shared by the encoders (peak RSS of an encode) and level L4 (peak RSS of an index build), so the
two are measured the same way.
"""

from __future__ import annotations

import resource
import sys
import threading

import psutil

_RSS_POLL_SECONDS = 0.005
# ru_maxrss is in KiB on Linux and in bytes on macOS.
_MAXRSS_UNIT = 1 if sys.platform == "darwin" else 1024


class PeakRss:
    """Peak resident set size over a ``with`` block: sampled by a thread (native code such as
    FAISS or torch releases the GIL), and exact when the block raises the process's lifetime
    peak (``ru_maxrss``). ``start_bytes`` is the RSS when the block began."""

    def __init__(self) -> None:
        self.peak_bytes = 0
        self.start_bytes = 0
        self._stop = threading.Event()
        self._process = psutil.Process()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._lifetime_before = 0

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._process.memory_info().rss)
            self._stop.wait(_RSS_POLL_SECONDS)

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
