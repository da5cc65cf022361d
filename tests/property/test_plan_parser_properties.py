"""Properties of the plan parser, its renderer and the delegation envelope."""

from __future__ import annotations

from typing import get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autodev.errors import PlanParseError
from autodev.orchestrator.delegation_envelope import DelegationAction, DelegationEnvelope
from autodev.state.plan_markdown import (
    compute_content_hash,
    parse_plan_markdown,
    render_plan_markdown,
)
from autodev.state.schemas import AcceptanceCriterion, Phase, Plan, Task

SPEC_HASH = "0123abcd" * 8
CREATED = "2024-05-01T12:00:00+00:00"

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- random markdown built from the grammar's tokens ----------------------------------------------

_IDS = st.sampled_from(["1", "1.1", "1.2", "2", "2.1", "a", "A", "plan", "1..2", "", "x y"])
_WORDS = st.sampled_from(["Setup", "", "  ", "none", "a: b", "**bold**", "#", "é ü", "\t"])
_PATHS = st.sampled_from(["a.py", "`b.py`", "none", "-", "../x", "/abs", "C:\\x", "./c//d.py", ""])
_FREE_TEXT = st.text(max_size=20)


def _joined(items: st.SearchStrategy[str], sep: str) -> st.SearchStrategy[str]:
    return st.lists(items, max_size=3).map(sep.join)


_INDENT = st.sampled_from(["", "  ", "    ", "\t"])
_HEADING_LINES = st.one_of(
    st.builds("# Plan: {}".format, _WORDS),
    st.sampled_from(["# Plan", "# Plan:", "## Phase", "### Task", "## Notes", "---", ""]),
    st.builds("## Phase {}: {}".format, _IDS, _WORDS),
    st.builds("### Task {}: {}".format, _IDS, _WORDS),
)
_BODY_LINES = st.one_of(
    st.builds("{}- Description: {}".format, _INDENT, _FREE_TEXT),
    st.builds("{}- Files: {}".format, _INDENT, _joined(_PATHS, ", ")),
    st.builds("{}- Depends on: {}".format, _INDENT, _joined(_IDS, ", ")),
    st.builds("{}- **Acceptance criteria:** {}".format, _INDENT, _WORDS),
    st.builds("{}- [{}] {}".format, _INDENT, st.sampled_from([" ", "x", "X", "?"]), _FREE_TEXT),
    st.builds("{}{} {}".format, _INDENT, st.sampled_from(["-", "*", "+"]), _FREE_TEXT),
    st.builds("{}{}".format, _INDENT, _FREE_TEXT),
    st.sampled_from(["```", "```markdown", "~~~", "``` not a fence"]),
)
_BODY = st.lists(_BODY_LINES, max_size=4)


@st.composite
def _skeletons(draw: st.DrawFn) -> str:
    """Mostly well-formed plans with random body lines, so that many of them parse."""
    lines = [*draw(_BODY), "# Plan: Skeleton", *draw(_BODY)]
    ids = st.sampled_from(["1", "2", "3", "1.1", "1.2", "2.1", "b-2", "c_3"]) | _IDS
    task_ids = iter(draw(st.lists(ids, min_size=6, max_size=6)))
    for phase_id in draw(st.lists(ids, min_size=1, max_size=3)):
        lines += [f"## Phase {phase_id}: Phase", *draw(_BODY)]
        for _ in range(draw(st.integers(1, 2))):
            lines += [f"### Task {next(task_ids)}: Task", *draw(_BODY)]
    return "\n".join(lines)


_MARKDOWN = st.one_of(
    _skeletons(),
    st.lists(st.one_of(_HEADING_LINES, _BODY_LINES), max_size=40).map("\n".join),
    st.text(max_size=200),
)


@PROPERTY_SETTINGS
@given(_MARKDOWN)
def test_any_text_parses_or_raises_plan_parse_error(md: str) -> None:
    try:
        plan = parse_plan_markdown(md, SPEC_HASH, created_at=CREATED)
    except PlanParseError as exc:
        assert exc.message
        assert "\n" not in exc.message
        return

    assert isinstance(plan, Plan)
    assert plan.content_hash == compute_content_hash(plan)
    assert parse_plan_markdown(render_plan_markdown(plan), SPEC_HASH, created_at=CREATED) == plan


# --- generated valid plans ------------------------------------------------------------------------

_ALNUM = "abcXYZ0129"
_ID = st.builds(
    lambda first, rest: first + "".join(rest),
    st.text(_ALNUM, min_size=1, max_size=4),
    st.lists(
        st.builds(str.__add__, st.sampled_from("._-"), st.text(_ALNUM, min_size=1, max_size=3)),
        max_size=3,
    ),
).filter(lambda value: len(value) <= 40 and value.lower() != "plan")


_LINE = (
    st.text(
        # Control characters and Unicode line/paragraph separators would break the line.
        st.characters(exclude_categories=("Cs", "Cc", "Zl", "Zp"), include_characters="\t"),
        min_size=1,
        max_size=30,
    )
    .map(str.strip)
    .filter(bool)
)
# Plan and phase description lines sit at column 0, where a heading or a fence would be structure.
_PROSE_LINE = _LINE.map(lambda line: "x" + line if line.startswith(("#", "`", "~")) else line)
_SEGMENT = st.one_of(
    st.sampled_from(["none", "-", "n/a", "src", "a.py"]),
    st.text(_ALNUM + "_.- é", min_size=1, max_size=8).map(str.strip),
).filter(lambda part: part not in {"", ".", ".."})
_PATH = st.lists(_SEGMENT, min_size=1, max_size=3).map("/".join)
_CRITERION = st.builds(AcceptanceCriterion, description=_LINE, met=st.booleans())


@st.composite
def _valid_plans(draw: st.DrawFn) -> Plan:
    task_ids = draw(st.lists(_ID, min_size=1, max_size=6, unique_by=str.lower))
    count = draw(st.integers(1, min(4, len(task_ids))))
    phase_ids = draw(st.lists(_ID, min_size=count, max_size=count, unique_by=str.lower))
    cuts: set[int] = set()
    if count > 1:
        cuts = draw(st.sets(st.integers(1, len(task_ids) - 1), min_size=count - 1, max_size=count - 1))
    bounds = [0, *sorted(cuts), len(task_ids)]
    phases: list[Phase] = []
    seen: list[str] = []
    for phase_id, start, end in zip(phase_ids, bounds, bounds[1:], strict=False):
        tasks: list[Task] = []
        for task_id in task_ids[start:end]:
            # Depending only on earlier tasks keeps the graph acyclic; later phases may depend on
            # earlier ones.
            depends = draw(st.lists(st.sampled_from(seen), unique=True)) if seen else []
            tasks.append(
                Task(
                    id=task_id,
                    phase_id=phase_id,
                    title=draw(_LINE),
                    description="\n".join(draw(st.lists(_LINE, max_size=2))),
                    files=draw(st.lists(_PATH, max_size=2, unique=True)),
                    depends_on=depends,
                    acceptance=draw(st.lists(_CRITERION, max_size=2)),
                    assigned_agent="developer",
                )
            )
            seen.append(task_id)
        phases.append(
            Phase(
                id=phase_id,
                title=draw(_LINE),
                description="\n".join(draw(st.lists(_PROSE_LINE, max_size=2))),
                tasks=tasks,
            )
        )
    return Plan(
        plan_id="plan-unset",
        spec_hash=SPEC_HASH,
        title=draw(_LINE),
        description="\n".join(draw(st.lists(_PROSE_LINE, max_size=2))),
        phases=phases,
        created_at=CREATED,
        updated_at=CREATED,
    )


@PROPERTY_SETTINGS
@given(_valid_plans())
def test_render_then_parse_keeps_every_authored_field(plan: Plan) -> None:
    parsed = parse_plan_markdown(render_plan_markdown(plan), SPEC_HASH, created_at=CREATED)

    assert parsed == plan.model_copy(update={"plan_id": parsed.plan_id, "content_hash": parsed.content_hash})
    assert parse_plan_markdown(render_plan_markdown(parsed), SPEC_HASH, created_at=CREATED) == (parsed)


# --- delegation envelope --------------------------------------------------------------------------

_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
_ENVELOPES = st.builds(
    DelegationEnvelope,
    task_id=st.text(max_size=10),
    target_agent=st.text(max_size=10),
    action=st.sampled_from(get_args(DelegationAction)),
    files=st.lists(st.text(max_size=10), max_size=3),
    constraints=st.lists(st.text(max_size=10), max_size=3),
    acceptance=st.none() | st.text(max_size=20),
    context=st.dictionaries(st.text(max_size=8), _JSON_VALUES, max_size=4),
)


@PROPERTY_SETTINGS
@given(_ENVELOPES)
def test_envelope_round_trips_through_json(envelope: DelegationEnvelope) -> None:
    restored = DelegationEnvelope.model_validate_json(envelope.model_dump_json())

    assert restored == envelope
    assert restored.render_as_task_message() == envelope.render_as_task_message()
