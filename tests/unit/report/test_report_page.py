"""The report's diff colouring (each file in its own language, each line from its own side of the change), its
tournament passes, read from the summary the tournament engine itself writes, and its budget gauge."""

from __future__ import annotations

import re
from html import unescape

from autodev.report.data import ReportData, TournamentPass
from autodev.report.highlight import highlight_diff
from autodev.report.page import render
from autodev.tournament.engine import JudgeRecord, PassRecord

PYTHON_CHANGE = """diff --git a/src/m.py b/src/m.py
index 1111111..2222222 100644
--- a/src/m.py
+++ b/src/m.py
@@ -1,4 +1,4 @@
 import os
-DOC = \"\"\"opens a string
+def value(x: int) -> int:
+    return len(os.sep) + 1  # one
 x = 2
"""


def _lines(html: str) -> list[str]:
    return html.split("\n")


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def test_every_line_of_the_diff_is_kept_as_text() -> None:
    html = highlight_diff(PYTHON_CHANGE)
    assert _text(html).split("\n") == PYTHON_CHANGE.rstrip("\n").split("\n")


def test_python_is_coloured_by_kind_and_each_line_by_what_it_does() -> None:
    lines = _lines(highlight_diff(PYTHON_CHANGE))
    added = [line for line in lines if line.startswith("<span class='add'>")]
    removed = [line for line in lines if line.startswith("<span class='del'>")]
    assert len(added) == 2 and len(removed) == 1
    assert "<span class='tk'>def</span>" in added[0]
    assert "<span class='tf'>value</span>" in added[0]
    assert "<span class='tb'>len</span>" in added[1] and "<span class='tn'>1</span>" in added[1]
    assert "<span class='tc'># one</span>" in added[1]
    assert lines[0] == "<span class='file'>diff --git a/src/m.py b/src/m.py</span>"
    assert lines[4] == "<span class='hunk'>@@ -1,4 +1,4 @@</span>"


def test_a_removed_line_that_opens_a_string_does_not_colour_the_added_lines_as_string() -> None:
    lines = _lines(highlight_diff(PYTHON_CHANGE))
    removed = next(line for line in lines if line.startswith("<span class='del'>"))
    assert "<span class='ts'>&quot;&quot;&quot;opens a string</span>" in removed
    added = [line for line in lines if line.startswith("<span class='add'>")]
    assert all("class='ts'" not in line for line in added)
    # The context line after the change is on both sides; it is coloured as the new side has it.
    assert lines[-1] == " x = <span class='tn'>2</span>"


def test_each_file_takes_its_own_language_and_unknown_ones_stay_plain() -> None:
    change = (
        "diff --git a/app.js b/app.js\n--- a/app.js\n+++ b/app.js\n@@ -1 +1 @@\n-var a = 1;\n+const a = 2;\n"
        "diff --git a/notes.unknownext b/notes.unknownext\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/notes.unknownext\n@@ -0,0 +1 @@\n+const if def\n"
    )
    lines = _lines(highlight_diff(change))
    assert "<span class='tk'>const</span>" in lines[5]
    assert lines[-1] == "<span class='add'>+const if def</span>"


def test_code_that_looks_like_html_is_escaped() -> None:
    change = (
        "diff --git a/page.html b/page.html\n--- a/page.html\n+++ b/page.html\n@@ -0,0 +1 @@\n"
        "+<script>alert(1)</script>\n"
    )
    html = highlight_diff(change)
    assert "<script>" not in html
    # Tags are stripped from the HTML before it is unescaped, so the code survives only as escaped text.
    assert _text(html).endswith("+<script>alert(1)</script>")


def test_deletions_binaries_renames_and_missing_newlines_keep_their_lines() -> None:
    change = (
        "diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n"
        "-pass\n\\ No newline at end of file\n"
        "diff --git a/a.png b/a.png\nBinary files a/a.png and b/a.png differ\n"
        "diff --git a/x.py b/y.py\nsimilarity index 100%\nrename from x.py\nrename to y.py\n"
    )
    html = highlight_diff(change)
    assert _text(html).split("\n") == change.rstrip("\n").split("\n")
    assert "<span class='del'>-<span class='tk'>pass</span></span>" in html


def test_carriage_returns_and_form_feeds_stay_inside_their_lines() -> None:
    change = (
        "diff --git a/w.py b/w.py\n--- a/w.py\n+++ b/w.py\n@@ -1,2 +1,3 @@\n x = 1\r\n-y = 2\r\n"
        "+y = 3\r\n+\x0c\n"
    )
    lines = _lines(highlight_diff(change))
    assert len(lines) == 8
    assert lines[4] == " x = <span class='tn'>1</span>"
    assert lines[5] == "<span class='del'>-y = <span class='tn'>2</span></span>"
    assert lines[6] == "<span class='add'>+y = <span class='tn'>3</span></span>"
    assert lines[7] == "<span class='add'>+\x0c</span>"


def test_html_tags_are_coloured() -> None:
    change = (
        'diff --git a/p.html b/p.html\n--- a/p.html\n+++ b/p.html\n@@ -0,0 +1 @@\n+<div class="a">x</div>\n'
    )
    assert "<span class='tk'>div</span>" in highlight_diff(change)


def test_a_tournament_pass_is_read_from_the_engines_own_summary() -> None:
    judges = [
        JudgeRecord(judge_no=1, labels={}, order=[], valid=True, ranking_candidates=["AB", "A", "B"]),
        JudgeRecord(judge_no=2, labels={}, order=[], valid=True, ranking_candidates=["A", "AB", "B"]),
        JudgeRecord(judge_no=3, labels={}, order=[], valid=False, reason="not a permutation"),
    ]
    record = PassRecord(
        pass_no=2,
        incumbent="A",
        status="decided",
        judges=judges,
        scores={"A": 3, "AB": 3, "B": 0},
        winner="AB",
        margin=0,
    )
    one = TournamentPass.from_summary(record.summary())
    assert (one.number, one.status, one.winner, one.margin) == (2, "decided", "AB", 0)
    assert one.scores == (("A", 3), ("AB", 3), ("B", 0))
    assert one.judges == (
        (1, True, ("AB", "A", "B"), ""),
        (2, True, ("A", "AB", "B"), ""),
        (3, False, (), "not a permutation"),
    )


def _costed(spent: float, budget: float | None) -> str:
    data = ReportData(
        title="t",
        plan_id="plan-1",
        intent="",
        phases=[],
        span_s=1.0,
        agent_s=0.0,
        cost_usd=spent,
        tokens_in=10,
        tokens_out=5,
        cost_by_role_model={("developer", "m"): spent},
        tokens_by_role_model={("developer", "m"): 15},
        budget_usd=budget,
        started_at="2026-01-01T00:00:00+00:00",
    )
    return render(data)


def test_the_budget_is_a_line_across_the_bar_of_what_was_spent() -> None:
    page = _costed(1.0, 2.0)
    assert "budget: $2.00 (50% spent)" in page
    assert "<div class='budget-gauge'><span class='spent' style='width:150.0px'>" in page
    assert "<span class='line' style='left:298.0px'" in page
    over = _costed(3.0, 2.0)
    assert "<div class='budget-gauge over'><span class='spent' style='width:300.0px'>" in over
    assert "<span class='line' style='left:198.7px'" in over and "(150% spent)" in over
    assert "<div class='budget-gauge" not in _costed(1.0, None)
