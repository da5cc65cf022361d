"""Judging a gate against its base: what is new is blamed, what the base had is listed and excused."""

from __future__ import annotations

from pathlib import Path

from autodev.config.schema import QAGatesSettings
from autodev.qa.baseline import (
    BaselineStore,
    GateBaseline,
    baseline_key,
    cannot_run,
    excuse,
    require_tests_like_base,
    require_tests_still_run,
    tree_baseline,
)
from autodev.qa.environment import autodev_environment
from autodev.qa.gates import GateResult, RunCounts
from autodev.qa.junit import read_junit


def _failing(keys: list[str]) -> GateResult:
    return GateResult(
        gate="test",
        status="fail",
        findings=[f"{key}: failed" for key in keys],
        finding_keys=keys,
        reason=f"{len(keys)} tests failed",
        counts=RunCounts(passed=3, failed=len(keys), skipped=0, total=3 + len(keys)),
    )


def test_findings_the_base_has_too_are_moved_to_preexisting_and_the_rest_still_fail() -> None:
    judged = excuse(_failing(["t::old", "t::new"]), ["t::old", "t::gone"], base_label="the base commit abc")

    assert judged.status == "fail"
    assert judged.findings == ["t::new: failed"] and judged.finding_keys == ["t::new"]
    assert judged.preexisting == ["t::old: failed"]
    assert judged.reason == (
        "1 new failing test(s) (1 more fail on the base commit abc too and are not blamed on this change)"
    )


def test_only_preexisting_findings_pass_saying_so() -> None:
    judged = excuse(_failing(["t::old"]), ["t::old"], base_label="the base commit abc")

    assert judged.status == "pass"
    assert judged.reason == "only pre-existing failing test(s): 1 fail on the base commit abc too"
    assert judged.acceptable and judged.findings == []


def test_a_finding_counts_as_often_as_the_base_has_it() -> None:
    lint = GateResult(
        gate="lint",
        status="fail",
        findings=["a.py:1:1: F401 x", "a.py:9:1: F401 x"],
        finding_keys=["a.py\0F401\0x", "a.py\0F401\0x"],
    )

    judged = excuse(lint, ["a.py\0F401\0x"], base_label="base")

    assert judged.status == "fail"
    assert judged.findings == ["a.py:9:1: F401 x"] and judged.preexisting == ["a.py:1:1: F401 x"]


def test_what_cannot_be_compared_keeps_its_status() -> None:
    unkeyed = GateResult(gate="build", status="fail", reason="npm run build exited 1")
    assert excuse(unkeyed, ["anything"], base_label="base") == unkeyed
    no_base = _failing(["t::x"])
    assert excuse(no_base, None, base_label="base") == no_base


def test_no_tests_where_the_base_ran_some_is_a_failure() -> None:
    none = GateResult(gate="test", status="no_tests", reason="pytest collected no tests")
    base = GateBaseline(gate="test", status="pass", counts=RunCounts(passed=4, failed=0, skipped=0, total=4))

    judged = require_tests_like_base(none, base, base_label="the base commit abc")

    assert judged.status == "fail"
    assert judged.reason == "no tests ran, but 4 ran on the base commit abc: the change removed or hid them"
    empty = GateBaseline(
        gate="test", status="no_tests", counts=RunCounts(passed=0, failed=0, skipped=0, total=0)
    )
    assert require_tests_like_base(none, empty, base_label="x").status == "no_tests"


def test_a_base_whose_tests_cannot_run_is_recognised() -> None:
    collection = GateResult(
        gate="test",
        status="fail",
        reason="test collection failed or the run was interrupted",
        findings=["tests.test_x: error: ImportError"],
        finding_keys=["tests.test_x"],
        counts=RunCounts(passed=0, failed=1, skipped=0, total=1),
    )
    assert cannot_run(collection) == "test collection failed (tests.test_x): pytest ran no test"
    internal = GateResult(gate="test", status="error", reason="pytest hit an internal error", cause="change")
    assert cannot_run(internal) == "pytest hit an internal error"
    assert cannot_run(_failing(["t::a"])) is None  # tests that run and fail are pre-existing, not a stop


def test_the_store_keeps_baselines_by_tree_and_key_and_forgets_a_corrupt_file(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "baseline")
    key = baseline_key(QAGatesSettings(), autodev_environment())
    baseline = tree_baseline("a" * 40, key, [_failing(["t::a"])], taken_in="here", environment=None)
    store.save(baseline)

    assert store.load("a" * 40, key) == baseline
    assert store.load("a" * 40, "other") is None
    assert baseline_key(QAGatesSettings(on_missing_tool="skip"), autodev_environment()) != key
    (tmp_path / "baseline" / f"{'a' * 40}-{key}.json").write_text("{not json")
    assert store.load("a" * 40, key) is None


def test_junit_reports_of_both_families_are_read(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="5">
<testcase classname="tests.test_a" name="test_ok" time="0.001"/>
<testcase classname="tests.test_a" name="test_bad[1]"><failure message="assert 1 == 2">t</failure></testcase>
<testcase classname="tests.test_a" name="test_setup"><error message="fixture broke"/></testcase>
<testcase classname="tests.test_a" name="test_skip"><skipped message="not here"/></testcase>
<testcase classname="" name="tests.test_broken"><error message="collection failure"/></testcase>
</testsuite></testsuites>"""
    )

    parsed = read_junit(report)

    assert not isinstance(parsed, str)
    assert (parsed.total, parsed.passed, parsed.failed, parsed.skipped) == (5, 1, 3, 1)
    assert [case.id for case in parsed.failing] == [
        "tests.test_a::test_bad[1]",
        "tests.test_a::test_setup",
        "tests.test_broken",
    ]
    assert parsed.failing[0].message == "assert 1 == 2"
    assert read_junit(tmp_path / "missing.xml") == "pytest wrote no JUnit report"
    (tmp_path / "bad.xml").write_text("<html>")
    assert str(read_junit(tmp_path / "bad.xml")).startswith("the JUnit report cannot be parsed")


def _tests_run(executed: list[str], not_run: tuple[str, ...] = ()) -> GateResult:
    return GateResult(
        gate="test",
        status="pass",
        counts=RunCounts(
            passed=len(executed), failed=0, skipped=len(not_run), total=len(executed) + len(not_run)
        ),
        executed=executed,
        not_run=list(not_run),
    )


def _base(executed: list[str], skipped: list[str] | None = None) -> GateBaseline:
    return GateBaseline(
        gate="test",
        status="pass",
        counts=RunCounts(passed=len(executed), failed=0, skipped=0, total=len(executed)),
        executed=executed,
        skipped=skipped or [],
    )


def test_tests_that_ran_on_the_base_and_are_now_xfailed_or_skipped_fail_the_gate() -> None:
    now = _tests_run(["tests.test_a::test_one"], ("tests.test_a::test_two: xfailed (flaky)",))

    judged = require_tests_still_run(
        now, _base(["tests.test_a::test_one", "tests.test_a::test_two"]), ["src/mod.py"], base_label="base"
    )

    assert judged.status == "fail"
    assert judged.findings == ["tests.test_a::test_two: xfailed (flaky)"]
    assert judged.finding_keys == ["not-run:tests.test_a::test_two"]
    assert "did not run" in (judged.reason or "")


def test_a_test_gone_from_an_untouched_file_was_deselected_but_one_the_change_edits_is_the_reviewers() -> (
    None
):
    base = _base(["tests.test_a::test_one", "tests.test_b::test_old"])
    now = _tests_run([])

    untouched = require_tests_still_run(now, base, ["tests/test_b.py"], base_label="base")

    assert untouched.findings == ["tests.test_a::test_one: not run (deselected or not collected)"]


def test_new_tests_that_do_not_run_fail_but_tests_skipped_on_the_base_too_do_not() -> None:
    base = _base(["t.test_a::test_one"], skipped=["t.test_a::test_gpu"])
    now = _tests_run(
        ["t.test_a::test_one"], ("t.test_a::test_gpu: skipped (no gpu)", "t.test_new::test_it: xfailed")
    )

    judged = require_tests_still_run(now, base, ["t/test_new.py"], base_label="base")

    assert judged.findings == ["t.test_new::test_it: xfailed"]


def test_a_baseline_without_test_ids_judges_nothing() -> None:
    old = GateBaseline(gate="test", status="pass", counts=RunCounts(passed=1, failed=0, skipped=0, total=1))
    now = _tests_run([], ("x::y: skipped",))

    assert require_tests_still_run(now, old, [], base_label="base") == now


def test_xfailed_cases_are_read_as_not_run_and_xpassed_ones_as_run(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="t" name="a"><skipped type="pytest.xfail" message="later"/></testcase>'
        '<testcase classname="t" name="b"/>'
        '<testcase classname="t" name="c"><skipped type="pytest.skip" message="no gpu"/></testcase>'
        "</testsuite></testsuites>"
    )

    parsed = read_junit(report)

    assert not isinstance(parsed, str)
    assert parsed.executed == 1
    assert [case.not_run_text() for case in parsed.cases if not case.executed] == [
        "t::a: xfailed (later)",
        "t::c: skipped (no gpu)",
    ]
