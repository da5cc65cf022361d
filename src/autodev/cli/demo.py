"""``autodev demo``: the whole pipeline, offline, on a scratch repository.

It creates a small Python project in a new git repository and a script for the ``ScriptedAdapter`` that plays
every role: the explorer, the domain expert and the architect produce a two-task plan; the developer writes
real code; the reviewer rejects the first attempt of task 1.1 (so the developer gets the reviewer's issue and
fixes it); the test engineer adds real tests. Everything else is real: git, the QA gates (py_compile, ruff,
an import check, pytest, detect-secrets) and AutoDev's own run of the tests that checks the test
engineer's claim.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from autodev.adapters.scripted import Script
from autodev.errors import AutodevError

__all__ = ["DEMO_INTENT", "DemoSetup", "prepare_demo"]

DEMO_INTENT = (
    "Add a slugify(text) helper to textutils, exported from the package, with tests.\n"
    "Write scope: textutils/**, tests/**"
)

_PROJECT: dict[str, str] = {
    "pyproject.toml": (
        '[project]\nname = "textutils"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n\n'
        '[tool.ruff]\nline-length = 100\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    ),
    "README.md": "# textutils\n\nSmall text helpers.\n",
    "textutils/__init__.py": (
        '"""Small text helpers."""\n\nfrom textutils.case import title_case\n\n__all__ = ["title_case"]\n'
    ),
    "textutils/case.py": (
        '"""Changing the case of words."""\n\n\ndef title_case(text: str) -> str:\n'
        '    """Upper-case the first letter of every word."""\n'
        '    return " ".join(word[:1].upper() + word[1:] for word in text.split())\n'
    ),
    "tests/test_case.py": (
        "from textutils import title_case\n\n\ndef test_title_case() -> None:\n"
        '    assert title_case("hello world") == "Hello World"\n'
    ),
}

_PLAN = """# Plan: Add a slugify helper to textutils

## Phase 1: Slugify
Implement the helper, then export it from the package.

### Task 1.1: Implement slugify
- Description: Add slugify(text) to textutils/slug.py: lower-case, fold accents to ASCII,
  collapse every run of other characters into one hyphen, strip hyphens at both ends.
- Files: textutils/slug.py, tests/test_slug.py
- Acceptance:
  - [ ] slugify("Hello, World!") == "hello-world"
  - [ ] slugify("Crème brûlée") == "creme-brulee"

### Task 1.2: Export slugify from the package
- Description: Re-export slugify from textutils/__init__.py and list it in __all__.
- Files: textutils/__init__.py, tests/test_exports.py
- Depends: 1.1
- Acceptance:
  - [ ] from textutils import slugify works
"""

_SLUG_FIRST = """import re
import unicodedata


def slugify(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
"""

_SLUG_FIXED = '''"""Turning arbitrary text into URL-friendly slugs."""

import re
import unicodedata

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """Lower-case ``text``, fold accents to ASCII and join the words with single hyphens."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _NOT_ALNUM.sub("-", ascii_text.lower()).strip("-")
'''

_SLUG_TESTS = """from textutils.slug import slugify


def test_punctuation_becomes_one_hyphen() -> None:
    assert slugify("Hello, World!") == "hello-world"


def test_accents_are_folded() -> None:
    assert slugify("Crème brûlée") == "creme-brulee"


def test_only_punctuation_gives_an_empty_slug() -> None:
    assert slugify("!!!") == ""
"""

_INIT_EXPORTING = (
    '"""Small text helpers."""\n\n'
    "from textutils.case import title_case\n"
    "from textutils.slug import slugify\n\n"
    '__all__ = ["slugify", "title_case"]\n'
)

_EXPORT_TESTS = """import textutils


def test_slugify_is_exported() -> None:
    assert "slugify" in textutils.__all__
    assert textutils.slugify("A b") == "a-b"
"""


_EXPLORER = """textutils is a small package: textutils/case.py holds title_case, re-exported from
textutils/__init__.py; tests live in tests/ and run with pytest; ruff is configured in pyproject.toml.
FILES:
- textutils/__init__.py
- textutils/case.py
- tests/test_case.py
LESSON: textutils re-exports every public helper from textutils/__init__.py
"""

_DOMAIN_EXPERT = """TOPIC: URL slugs
Fold accents with unicodedata NFKD before dropping non-ASCII; collapse runs of separators into one
hyphen; never leave leading or trailing hyphens.
CONFIDENCE: HIGH
"""

_REVIEW_REJECT = """VERDICT: NEEDS_CHANGES
ISSUES:
- textutils/slug.py has no module docstring and slugify has no docstring; every module in textutils
  documents itself
"""

_CRITIC = """VERDICT: NEEDS_REVISION
ISSUES:
- the task kept failing
RECOMMENDATION: re-plan the task with smaller steps
"""


def _script() -> Script:
    return Script.model_validate(
        {
            "entries": [
                {
                    "role": "explorer",
                    "text": _EXPLORER,
                },
                {
                    "role": "domain_expert",
                    "text": _DOMAIN_EXPERT,
                },
                {"role": "architect", "text": _PLAN},
                {
                    "role": "developer",
                    "task_id": "1.1",
                    "attempt": 1,
                    "text": "Implemented slugify in textutils/slug.py.\nCHANGED:\n- textutils/slug.py",
                    "edits": [{"path": "textutils/slug.py", "content": _SLUG_FIRST}],
                },
                {
                    "role": "developer",
                    "task_id": "1.1",
                    "attempt": 2,
                    "text": (
                        "Added the module and function docstrings the reviewer asked for, and compiled the "
                        "pattern once.\nCHANGED:\n- textutils/slug.py\n"
                        "LESSON: every module and public function in textutils has a docstring"
                    ),
                    "edits": [{"path": "textutils/slug.py", "content": _SLUG_FIXED}],
                },
                {
                    "role": "reviewer",
                    "task_id": "1.1",
                    "responses": [
                        {"text": _REVIEW_REJECT},
                        {"text": "VERDICT: APPROVED\nISSUES:\n- none"},
                    ],
                },
                {
                    "role": "test_engineer",
                    "task_id": "1.1",
                    "text": "Added tests/test_slug.py.\nRESULTS: passed=4 failed=0 total=4",
                    "edits": [{"path": "tests/test_slug.py", "content": _SLUG_TESTS}],
                },
                {
                    "role": "developer",
                    "task_id": "1.2",
                    "text": "Exported slugify from the package.\nCHANGED:\n- textutils/__init__.py",
                    "edits": [{"path": "textutils/__init__.py", "content": _INIT_EXPORTING}],
                },
                {"role": "reviewer", "task_id": "1.2", "text": "VERDICT: APPROVED\nISSUES:\n- none"},
                {
                    "role": "test_engineer",
                    "task_id": "1.2",
                    "text": "Added tests/test_exports.py.\nRESULTS: passed=5 failed=0 total=5",
                    "edits": [{"path": "tests/test_exports.py", "content": _EXPORT_TESTS}],
                },
                {
                    "role": "critic_sounding_board",
                    "text": _CRITIC,
                },
            ]
        }
    )


@dataclass(frozen=True, slots=True)
class DemoSetup:
    repo_root: Path
    intent: str
    script: Script


def _git(root: Path, *args: str) -> None:
    result = subprocess.run(
        ["git", "-c", "user.name=AutoDev demo", "-c", "user.email=demo@autodev.invalid", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise AutodevError(f"demo: git {' '.join(args)} failed: {' '.join(result.stderr.split())[:200]}")


def prepare_demo(target: Path, *, force: bool = False) -> DemoSetup:
    """Create the scratch project at ``target`` (a new git repository) and the script that drives it."""
    target = target.resolve()
    if target.exists() and any(target.iterdir()):
        if not force:
            raise AutodevError(f"{target} is not empty; choose another --dir or pass --force to reuse it")
        subprocess.run(["rm", "-rf", str(target)], check=True)
    target.mkdir(parents=True, exist_ok=True)
    for relative, content in _PROJECT.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    _git(target, "init", "-q")
    _git(target, "add", "-A")
    _git(target, "commit", "-q", "-m", "textutils: initial version")
    return DemoSetup(repo_root=target, intent=DEMO_INTENT, script=_script())
