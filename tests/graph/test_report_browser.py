"""The HTML report in a real browser: it fits a 1,400 px window and a 375 px phone without
horizontal scrolling, opens on the ranking of the models and the verdict with every other section
folded, and its contents stay one click away. Screenshots of both widths are kept beside the
test's data."""

import shutil

import dagster as dg
import pytest
from graph_helpers import quick_protocol, small_ann, toy

from pipelines.runner import run_pipeline

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.sync_api", reason="Python playwright is not installed")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium found (Debian: apt-get install -y chromium)")

OVERFLOW = "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"


def test_the_report_fits_the_window_and_folds_each_models_sections(write_configs, tiny, tmp_path):
    folder = write_configs(models={"ngrams-48": toy(48), "ngrams-32": toy(32), "ngrams-24": toy(24)}, datasets=tiny,
                           protocol=quick_protocol(), ann=small_ann(flat={"factory": "Flat"}))
    data = tmp_path / "data"
    assert run_pipeline(folder, data, instance=dg.DagsterInstance.ephemeral()).failures == []
    report = data / "report" / "report.html"
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            for width, height in ((1400, 900), (375, 800)):
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(report.as_uri())
                scroll_width, client_width = page.evaluate(OVERFLOW)
                assert scroll_width <= client_width == width, f"{width} px: the page is {scroll_width} px wide"
                page.screenshot(path=str(shots / f"report-{width}px.png"), full_page=True)
                # The ranking (a table, a forest plot) and the verdict open the page; every other section is
                # folded below, closed.
                assert page.locator("h2").all_inner_texts()[:2] == ["Ranking: nDCG@10", "Verdict"]
                first_screen = page.locator("#verdict").evaluate("e => e.getBoundingClientRect().top")
                assert width < 1400 or first_screen < height, "the verdict is below the first screen"
                assert page.locator("body > div.table table").count() == 1 and page.locator("body > figure").count() == 1
                folded = page.locator("details")
                assert folded.count() >= 3 and all(not folded.nth(i).evaluate("d => d.open")
                                                   for i in range(folded.count()))
                # With every section closed the whole report is a few screens at 1,400 px.
                tall = page.evaluate("() => document.documentElement.scrollHeight")
                assert width < 1400 or tall <= 10_000, f"the closed report is {tall} px tall"
                assert any("L1 geometry" in text for text in page.locator("details > summary").all_inner_texts())
                # Opened, a section still fits the window.
                folded.first.locator("summary").click()
                assert folded.first.evaluate("d => d.open")
                scroll_width, client_width = page.evaluate(OVERFLOW)
                assert scroll_width <= client_width, f"{width} px, opened: {scroll_width} px wide"
                # From the bottom of the page the contents are one click away.
                page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
                link = page.get_by_role("link", name="↑ Contents")
                assert link.is_visible()
                link.click()
                assert page.locator("#contents").evaluate("e => e.getBoundingClientRect().top") < height / 2
                page.close()
        finally:
            browser.close()
    assert sorted(p.name for p in shots.iterdir()) == ["report-1400px.png", "report-375px.png"]
