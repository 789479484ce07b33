import io
import time

from embedpyramid import progress
from embedpyramid.progress import ProgressDisplay, showing


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def wait_for(stream: io.StringIO, text: str, seconds: float = 5.0) -> str:
    deadline = time.monotonic() + seconds
    while text not in stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    return stream.getvalue()


def test_piped_a_line_each_period_with_counts_rate_and_eta_and_nothing_after_the_step():
    stream, clock = io.StringIO(), Clock()
    display = ProgressDisplay(stream, terminal=False, period=30.0, clock=clock)
    with showing(display), progress.step("minilm-l6 × chatterbot-en"):
        progress.report("encoded documents", 100, 870)
        clock.now = 10.0
        progress.report("encoded documents", 300, 870)  # 200 texts since the work began
        assert stream.getvalue() == ""  # piped: no line per batch
        clock.now = 30.0
        out = wait_for(stream, "\n")
        # The rate over the time since the work began (30 s for 200 texts), as tqdm shows it.
        assert out == "minilm-l6 × chatterbot-en: encoded documents 300/870 (34%), 7/s, ETA 1m26s · 30s\n"
        clock.now = 95.0
        out = wait_for(stream, "1m35s")
        assert out.splitlines()[-1] == (
            "minilm-l6 × chatterbot-en: encoded documents 300/870 (34%), 2/s, ETA 4m31s · 1m35s")
    clock.now = 500.0
    time.sleep(0.6)
    assert len(stream.getvalue().splitlines()) == 2 and progress._CURRENT is None


def test_on_a_terminal_one_live_line_redrawn_and_cleared_for_the_commands_own_lines():
    stream, clock = io.StringIO(), Clock()
    display = ProgressDisplay(stream, terminal=True, clock=clock)
    assert display.period == 2.0
    with showing(display), progress.step("summary"):
        clock.now = 2.0
        assert wait_for(stream, "working").endswith("\r\x1b[Ksummary: working, 2s")
        display.line("summary: never materialized: comparisons")
        assert stream.getvalue().endswith("\r\x1b[Ksummary: never materialized: comparisons\n\r\x1b[Ksummary: working, 2s")
        clock.now = 3.0
        progress.report("bootstrap resamples", 5000, 10000)
        assert stream.getvalue().endswith("\r\x1b[Ksummary: bootstrap resamples 5,000/10,000 (50%) · 3s")
    assert stream.getvalue().endswith("\r\x1b[K")  # the live line is gone once the step is done


def test_without_a_display_reports_cost_nothing_and_print_nothing(capsys):
    with progress.step("anything"):
        progress.report("encoded", 1, 2)
    assert capsys.readouterr() == ("", "")
