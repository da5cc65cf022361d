"""``autodev report`` in a real headless browser: Debian's Chromium, driven by Playwright, opens the report of
a demo run from ``file://`` and finds every task, the timeline's bars, a diff and a gate's output on screen,
with no request leaving the page and no error in its console; a screenshot shows more than a blank page. A
reviewer's words that look like HTML are shown as text, never run. Where no Chromium is installed the test
is skipped, except in CI (``CI`` set), which installs it and must run it."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from support.orchestration import Recorder, config_for, demo_project, script_with

from autodev.adapters.scripted import ScriptedAdapter
from autodev.orchestrator import Orchestrator

pytestmark = pytest.mark.slow

HOSTILE = "<img src=x onerror=alert(1)><script>document.title='owned'</script>"


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have Chromium for the report test (.ci/run installs Debian's chromium)")
        pytest.skip("no Chromium on PATH (apt-get install chromium)")
    return found


def _demo_report(tmp_path: Path, autodev_exe: Path) -> Path:
    setup = demo_project(tmp_path)
    review = {"role": "reviewer", "task_id": "1.2", "text": f"VERDICT: APPROVED\nISSUES:\n- {HOSTILE}"}
    orch = Orchestrator(
        setup.repo_root,
        config=config_for(setup.repo_root, **{"qa_gates.secretscan.enabled": False}),
        adapter=ScriptedAdapter(script=script_with(setup, review)),
        listener=Recorder(),
        write_scope="**",
    )
    assert all(task.status == "complete" for task in anyio.run(lambda: orch.run(setup.intent)).tasks)
    made = subprocess.run(
        [str(autodev_exe), "-C", str(setup.repo_root), "report"], capture_output=True, text=True, check=True
    )
    page = setup.repo_root / ".autodev" / "report" / "index.html"
    assert made.stdout.strip() == f"Report: {page}"
    return page


def test_the_report_of_a_demo_run_shows_everything_offline_in_a_real_browser(tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    image = pytest.importorskip("PIL.Image")
    chromium = _chromium()
    autodev_exe = Path(sys.executable).with_name("autodev")
    page_file = _demo_report(tmp_path, autodev_exe)

    requests: list[str] = []
    problems: list[str] = []
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("request", lambda request: requests.append(request.url))
        page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(page_file.as_uri())

        assert page.title().startswith("AutoDev report")
        plan_rows = page.locator("#plan td:first-child").all_inner_texts()
        assert plan_rows == ["1.1", "1.2"]
        assert page.locator("#timeline .row").count() == 2
        bars = page.locator("#timeline .bar")
        assert bars.count() >= 7  # 1.1 took two attempts: at least developer, gates, review twice, then on
        assert all(bars.nth(index).is_visible() for index in range(bars.count()))
        assert page.locator("#timeline .bar.fail").count() >= 1  # the review that sent 1.1 back
        page.locator("#task-1\\.1 > summary").click()
        diff = page.locator("#task-1\\.1 pre.diff")
        assert diff.is_visible() and "def slugify" in diff.inner_text()
        assert page.locator("#task-1\\.1 pre.diff .add").first.is_visible()
        gate_output = page.locator("#task-1\\.1 tr.gate pre").first
        assert gate_output.is_visible()
        assert any("pytest" in argv for argv in page.locator("#task-1\\.1 tr.gate code").all_inner_texts())
        # The reviewer's HTML is text on the page, not markup that ran.
        page.locator("#task-1\\.2 > summary").click()
        assert HOSTILE in page.locator("#task-1\\.2").inner_text()
        assert page.title() != "owned" and page.locator("#task-1\\.2 img").count() == 0
        shot = page.screenshot(full_page=True)
        browser.close()

    assert problems == []
    assert requests and all(url.startswith("file://") for url in requests), requests
    picture = image.open(io.BytesIO(shot)).convert("L")
    histogram = picture.histogram()
    pixels = sum(histogram)
    mean = sum(value * count for value, count in enumerate(histogram)) / pixels
    variance = sum(count * (value - mean) ** 2 for value, count in enumerate(histogram)) / pixels
    assert variance > 100, variance  # a blank (or all-one-colour) page has a variance near 0
