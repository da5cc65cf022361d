"""``autodev report`` in a real headless browser: Debian's Chromium, driven by Playwright, opens the report of
a demo run from ``file://`` and finds every task, the timeline's bars, a diff and a gate's output on screen,
with no request leaving the page and no error in its console; a screenshot shows more than a blank page. A
reviewer's words that look like HTML are shown as text, never run. The pages of a one-task run and of a
thousand-task run (recorded by ``bench/report.py``) are opened the same way: the small one shows its task in
full, the large one opens folded and its phases, pages and tasks unfold on click. Where no Chromium is
installed the tests are skipped, except in CI (``CI`` set), which installs it and must run them."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from keyword import iskeyword
from pathlib import Path
from typing import Any

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


@contextmanager
def _browser_page(page_file: Path) -> Iterator[Any]:
    """``page_file`` open in headless Chromium; on leaving, no request may have left the page and its console
    must show no error."""
    playwright = pytest.importorskip("playwright.sync_api")
    chromium = _chromium()
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
        yield page
        browser.close()
    assert problems == []
    assert requests and all(url.startswith("file://") for url in requests), requests


def _assert_not_blank(shot: bytes) -> None:
    image = pytest.importorskip("PIL.Image")
    picture = image.open(io.BytesIO(shot)).convert("L")
    histogram = picture.histogram()
    pixels = sum(histogram)
    mean = sum(value * count for value, count in enumerate(histogram)) / pixels
    variance = sum(count * (value - mean) ** 2 for value, count in enumerate(histogram)) / pixels
    assert variance > 100, variance  # a blank (or all-one-colour) page has a variance near 0


def _recorded_report(repo: Path, tasks: int, per_phase: int) -> Path:
    """The page of a run of ``tasks`` recorded by the report benchmark in a fresh repository ``repo``."""
    bench = Path(__file__).parents[2] / "bench" / "report.py"
    made = subprocess.run(
        [
            sys.executable,
            str(bench),
            "--tasks",
            str(tasks),
            "--per-phase",
            str(per_phase),
            "--runs",
            "1",
            "--keep",
            str(repo),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    page = Path(json.loads(made.stdout)["page"])
    assert page.is_file()
    return page


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Any]:
    """Records runs on a tmpfs when there is one (the recording's ten thousand fsyncs are not what these
    tests are about), removed afterwards however the test ends; else under ``tmp_path``."""
    shm = Path("/dev/shm")
    on_tmpfs = shm.is_dir() and os.access(shm, os.W_OK)
    scratch = Path(tempfile.mkdtemp(dir=shm)) if on_tmpfs else tmp_path
    count = 0

    def record(tasks: int, per_phase: int = 100) -> Path:
        nonlocal count
        count += 1
        return _recorded_report(scratch / f"repo-{count}", tasks, per_phase)

    yield record
    if on_tmpfs:
        shutil.rmtree(scratch, ignore_errors=True)


def test_the_report_of_a_demo_run_shows_everything_offline_in_a_real_browser(tmp_path: Path) -> None:
    pytest.importorskip("playwright.sync_api")
    _chromium()
    autodev_exe = Path(sys.executable).with_name("autodev")
    page_file = _demo_report(tmp_path, autodev_exe)

    with _browser_page(page_file) as page:
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
        # The diff is coloured as Python: its keywords are marked and shown in their own colour.
        keyword = page.locator("#task-1\\.1 pre.diff .add .tk").first
        assert keyword.is_visible() and iskeyword(keyword.inner_text())
        assert keyword.evaluate("e => getComputedStyle(e).color") != diff.evaluate(
            "e => getComputedStyle(e).color"
        )
        gate_output = page.locator("#task-1\\.1 tr.gate pre").first
        assert gate_output.is_visible()
        assert any("pytest" in argv for argv in page.locator("#task-1\\.1 tr.gate code").all_inner_texts())
        # The reviewer's HTML is text on the page, not markup that ran.
        page.locator("#task-1\\.2 > summary").click()
        assert HOSTILE in page.locator("#task-1\\.2").inner_text()
        assert page.title() != "owned" and page.locator("#task-1\\.2 img").count() == 0
        shot = page.screenshot(full_page=True)
    _assert_not_blank(shot)


def test_the_report_of_a_one_task_run(recorded: Any) -> None:
    with _browser_page(recorded(1)) as page:
        assert page.locator("#plan td:first-child").all_inner_texts() == ["1.1"]
        rows = page.locator("#timeline .row")
        assert rows.count() == 1 and rows.first.is_visible()
        assert "critical" in (rows.first.get_attribute("class") or "")  # one task is its own critical path
        bars = page.locator("#timeline .bar")
        assert bars.count() >= 6 and all(bars.nth(i).is_visible() for i in range(bars.count()))
        steps = [bars.nth(i).get_attribute("data-step") for i in range(bars.count())]
        # Sent back once by its reviewer, then through the tests and a tournament to the merge.
        assert steps == [*["developer", "gates", "review"] * 2, "tests", "tournament", "merge"], steps
        # Task 1.1 went through a tournament: its passes and each judge's ranking are in a table.
        page.locator("#task-1\\.1 > summary").click()
        assert page.locator("#task-1\\.1 pre.diff .tk").first.is_visible()
        passes = page.locator("#task-1\\.1 table.tournament tr.pass")
        assert passes.count() == 2 and passes.first.is_visible()
        assert "judge 1: AB > A > B" in passes.first.inner_text()
        assert "judge 3: not counted" in passes.nth(1).inner_text()
        figures = page.locator("#totals .figure").all_inner_texts()
        assert any(figure.startswith("tasks") and figure.endswith("1") for figure in figures), figures
        shot = page.screenshot(full_page=True)
    _assert_not_blank(shot)


def test_the_report_of_a_thousand_tasks_opens_folded_and_unfolds(recorded: Any) -> None:
    with _browser_page(recorded(1000, per_phase=500)) as page:
        assert page.locator("#plan td:first-child").count() == 1000
        assert page.locator("#timeline .row").count() == 1000
        phases = page.locator("#timeline > details.phase")
        assert phases.count() == 2
        # Folded: no timeline row is on screen until its phase and page are opened.
        assert not page.locator("#timeline .row").first.is_visible()
        phases.first.locator("> summary").click()
        pages = phases.first.locator("> details.page")
        assert pages.count() == 5 and pages.first.is_visible()
        assert pages.first.locator("> summary").inner_text() == "tasks 1-100 of 500"
        assert not pages.first.locator(".row").first.is_visible()
        pages.first.locator("> summary").click()
        rows = pages.first.locator(".row")
        assert rows.count() == 100 and rows.first.is_visible() and rows.nth(99).is_visible()
        assert rows.first.locator(".bar").first.is_visible()
        # The tasks section folds the same way; a task deep in the plan opens to its diff.
        task = page.locator("#task-2\\.451")
        page.locator("#tasks > details.phase").nth(1).locator("> summary").click()
        page.locator("#tasks > details.phase").nth(1).locator("> details.page").nth(4).locator(
            "> summary"
        ).click()
        task.locator("> summary").click()
        assert task.locator("pre.diff .tk").first.is_visible()
        passes = task.locator("table.tournament tr.pass")  # every fiftieth task went through a tournament
        assert passes.count() == 2 and passes.first.is_visible()
        shot = page.screenshot()
    _assert_not_blank(shot)
