"""The report in a real headless browser (Chromium from the OS packages, driven
by playwright): it loads without console errors, the heat map has a cell per
result, a click opens the cell's page; and how long a 10,000-result report
takes to render, measured in the browser."""
import os
import shutil
import time

import pytest

from fpspec.survey.plan import Job, Variant
from fpspec.survey.report import write_report
from fpspec.survey.store import Store

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (apt-get install chromium)")

SPECS = {"seq": "n in 8\narithmetic { input = fp32 product = none accumulator = fp32 output = fp32 }\norder seq\n",
         "rev": "n in 8\narithmetic { input = fp32 product = none accumulator = fp32 output = fp32 }\norder rev\n"}


def fill(store: Store, rows: int, envs: int) -> int:
    """rows x envs results of a sum at n = 8; environment k > 0 reverses every third row."""
    from fpspec.survey.worker import classify

    classes = {}
    count = 0
    for e in range(envs):
        env_id = store.environment(f"h{e}", f"environment {e}", {"cpu": f"cpu {e}"})
        for r in range(rows):
            order = "rev" if e and r % 3 == 0 else "seq"
            job = Job(f"lib.f{r}", "float32", "8", "sum", variant=Variant("default"))
            if order not in classes:
                classes[order] = classify(SPECS[order], job)
            store.add(env_id, {"job_key": job.key, "job": job.to_json(), "status": "ok", "message": None,
                               **classes[order], "seconds": 0.01})
            count += 1
    return count


def browse(url: str, action):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            errors = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            return action(page, errors)
        finally:
            browser.close()


def test_heat_map_loads_counts_cells_and_opens_a_cell(tmp_path):
    with Store(tmp_path / "s.db") as store:
        count = fill(store, rows=6, envs=3)
        index = write_report(store, tmp_path / "report")

    def look(page, errors):
        page.goto(index.as_uri())
        cells = page.locator("td.cell")
        assert cells.count() == count == 18
        counts = page.locator("td.count").all_inner_texts()
        assert counts == ["2", "1", "1", "2", "1", "1"]
        page.locator("td.cell a").nth(4).click()
        page.wait_for_load_state()
        assert page.locator("#cell-title").inner_text().startswith("lib.f")
        assert "order" in page.locator("#spec").inner_text()
        page.go_back()
        assert errors == []

    browse(index, look)


def test_a_ten_thousand_result_report_renders_in_the_browser(tmp_path, capsys):
    with Store(tmp_path / "big.db") as store:
        count = fill(store, rows=2000, envs=5)
        # the heat map is what a browser renders; the cell pages are separate files
        index = write_report(store, tmp_path / "report", cell_pages=False)

    def load(page, errors):
        started = time.perf_counter()
        page.goto(index.as_uri(), wait_until="load")
        seconds = time.perf_counter() - started
        assert page.locator("td.cell").count() == count == 10_000
        assert errors == []
        return seconds

    seconds = browse(index, load)
    with capsys.disabled():
        print(f"\n10,000-result report: loaded and rendered in {seconds:.2f} s (Chromium {os.path.basename(CHROMIUM)})")
