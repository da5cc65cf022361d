"""Properties of the judge's ranking parser and the test-results parser: no invented votes or passes."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autodev.agents.parsing import (
    parse_confidence,
    parse_critic_verdict,
    parse_files,
    parse_lessons,
    parse_ranking,
    parse_review_verdict,
    parse_test_results,
    parse_topic,
)

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_LABEL_ALPHABET = st.sampled_from("ABCXYZabcxyz019_-. *`")
_LABEL = st.text(_LABEL_ALPHABET, min_size=1, max_size=6).filter(lambda s: s == s.strip())
_LABELS = st.lists(_LABEL, min_size=1, max_size=5, unique=True)
_SEPARATOR = st.sampled_from([" > ", ">", ", ", ",", " >  ", " , "])
_DECORATION = st.sampled_from(["{}", "**{}**", "`{}`", "- {}", "> {}", "## {}", "  {}  "])
_NOISE = st.text(st.sampled_from("abc RANKING:>,*`-\n"), max_size=40)


def _line(tokens: list[str], separators: list[str]) -> str:
    parts = [tokens[0]] if tokens else []
    for token, separator in zip(tokens[1:], separators, strict=False):
        parts += [separator, token]
    return "RANKING: " + "".join(parts)


@st.composite
def _ranking_texts(draw: st.DrawFn) -> tuple[list[str], str]:
    labels = draw(_LABELS)
    junk = st.text(_LABEL_ALPHABET, max_size=4)
    tokens = draw(st.lists(st.one_of(st.sampled_from(labels), junk), max_size=7))
    separators = draw(st.lists(_SEPARATOR, min_size=len(tokens), max_size=len(tokens)))
    line = draw(_DECORATION).format(_line(tokens, separators))
    text = "\n".join([draw(_NOISE), line, draw(_NOISE)])
    return labels, text


@PROPERTY_SETTINGS
@given(_ranking_texts())
def test_ranking_is_none_or_a_permutation_of_exactly_the_labels(case: tuple[list[str], str]) -> None:
    labels, text = case

    ranking = parse_ranking(text, labels)

    assert ranking is None or sorted(ranking) == sorted(labels)


@PROPERTY_SETTINGS
@given(_LABELS.flatmap(lambda labels: st.tuples(st.just(labels), st.permutations(labels))))
def test_every_rendered_permutation_parses_back_to_itself(case: tuple[list[str], list[str]]) -> None:
    labels, order = case

    assert parse_ranking("Justification first.\nRANKING: " + " > ".join(order), labels) == order
    assert parse_ranking("RANKING: " + ", ".join(order) + "\nA short justification.", labels) == order


@st.composite
def _broken_rankings(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    labels = draw(_LABELS)
    order = draw(st.permutations(labels))
    broken = draw(st.sampled_from(["duplicate", "missing", "extra"]))
    if broken == "duplicate":
        index = draw(st.integers(0, len(order) - 1))
        order = [*order[: index + 1], order[index], *order[index + 1 :]]
    elif broken == "missing":
        order = order[:-1]
    else:
        extra = draw(_LABEL.filter(lambda label: label not in labels))
        order = [*order, extra]
    return labels, order


@PROPERTY_SETTINGS
@given(_broken_rankings(), _SEPARATOR)
def test_a_duplicate_missing_or_extra_label_is_always_none(
    case: tuple[list[str], list[str]], separator: str
) -> None:
    labels, order = case

    assert parse_ranking("RANKING: " + separator.join(order), labels) is None


_COUNT = st.integers(-5, 10**6)
_KEYS = st.permutations(["passed", "failed", "total"])


@PROPERTY_SETTINGS
@given(_KEYS, st.tuples(_COUNT, _COUNT, _COUNT), st.sampled_from([" ", ", ", " , ", "; "]), _NOISE, _NOISE)
def test_test_counts_are_never_impossible(
    keys: list[str], values: tuple[int, int, int], separator: str, before: str, after: str
) -> None:
    line = "RESULTS: " + separator.join(f"{key}={value}" for key, value in zip(keys, values, strict=True))
    stated = dict(zip(keys, values, strict=True))

    counts = parse_test_results(f"{before}\n{line}\n{after}")

    if counts is not None:
        assert min(counts.passed, counts.failed, counts.total) >= 0
        assert counts.total >= counts.passed + counts.failed
    # The noise cannot spell RESULTS, so the stated line is the one that decides.
    if min(values) >= 0 and stated["total"] >= stated["passed"] + stated["failed"]:
        assert counts is not None
        assert (counts.passed, counts.failed, counts.total) == (
            stated["passed"],
            stated["failed"],
            stated["total"],
        )
    else:
        assert counts is None


@PROPERTY_SETTINGS
@given(st.text(max_size=200))
def test_arbitrary_text_never_yields_impossible_counts(text: str) -> None:
    counts = parse_test_results(text)

    assert counts is None or counts.total >= counts.passed + counts.failed >= 0


_CONTRACT_TEXT = st.lists(
    st.one_of(
        st.text(max_size=30),
        st.builds(
            "{}{}: {}".format,
            st.sampled_from(["", "- ", "**", "> ", "`"]),
            st.sampled_from(
                ["VERDICT", "ISSUES", "RESULTS", "RANKING", "LESSON", "FILES", "TOPIC", "CONFIDENCE"]
            ),
            st.text(max_size=30),
        ),
    ),
    max_size=8,
).map("\n".join)


@PROPERTY_SETTINGS
@given(_CONTRACT_TEXT)
def test_parsers_never_raise_and_lessons_stay_bounded(text: str) -> None:
    parse_review_verdict(text)
    parse_critic_verdict(text)
    parse_confidence(text)
    parse_topic(text)
    parse_files(text)
    parse_ranking(text, ["A", "B", "AB"])
    lessons = parse_lessons(text)

    assert all(0 < len(lesson) <= 300 and lesson == lesson.strip() for lesson in lessons)
    assert len({lesson.casefold() for lesson in lessons}) == len(lessons)
