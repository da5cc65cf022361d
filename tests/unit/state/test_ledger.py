"""The hash-chained ledger: appends, verification, torn tails and tampering."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from autodev.errors import LedgerCorruptError, StateError
from autodev.state.ledger import GENESIS_HASH, Ledger


def _fill(path: Path, count: int) -> Ledger:
    ledger = Ledger(path)
    ledger.open()
    for i in range(count):
        ledger.append("note", {"i": i, "text": f"entry {i}"})
    ledger.close()
    return ledger


def test_entries_form_a_chain_with_fixed_key_order(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    _fill(path, 3)
    lines = path.read_text().splitlines()
    objs = [json.loads(line) for line in lines]
    assert [list(obj) for obj in objs] == [["seq", "ts", "op", "payload", "prev", "hash"]] * 3
    assert [obj["seq"] for obj in objs] == [1, 2, 3]
    assert objs[0]["prev"] == GENESIS_HASH
    assert objs[1]["prev"] == objs[0]["hash"]
    assert objs[2]["prev"] == objs[1]["hash"]


def test_reopen_verifies_and_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    first = _fill(path, 5)
    again = Ledger(path)
    head = again.open()
    assert head == first.head
    again.append("note", {"i": 5})
    assert [e.payload.get("i") for e in again.entries()] == [0, 1, 2, 3, 4, 5]
    assert [e.seq for e in again.entries(after_seq=3)] == [4, 5, 6]
    assert again.hash_at(6) == again.head.hash
    assert again.hash_at(7) is None


def test_torn_final_line_is_truncated_and_the_rest_kept(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    _fill(path, 4)
    intact = path.read_bytes()
    with path.open("ab") as handle:
        handle.write(b'{"seq":5,"ts":"2026-01-01T00:00:00","op":"no')
    ledger = Ledger(path)
    head = ledger.open()
    assert head.seq == 4
    assert ledger.torn_tail_bytes > 0
    assert path.read_bytes() == intact
    ledger.append("note", {"after": "crash"})
    assert Ledger(path).open().seq == 5


def test_readonly_open_leaves_a_torn_tail_alone(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    _fill(path, 2)
    with path.open("ab") as handle:
        handle.write(b'{"seq":3')
    before = path.read_bytes()
    assert Ledger(path, readonly=True).open().seq == 2
    assert path.read_bytes() == before


@pytest.mark.parametrize("target_line", [1, 3, 5])
def test_tampered_line_is_reported_with_its_line_number(tmp_path: Path, target_line: int) -> None:
    path = tmp_path / "ledger.jsonl"
    _fill(path, 6)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[target_line - 1] = lines[target_line - 1].replace(b"entry", b"ENTRY")
    path.write_bytes(b"".join(lines))
    with pytest.raises(LedgerCorruptError, match=rf"line {target_line}\b.*hash mismatch"):
        Ledger(path).open()


def test_rehashed_tampered_line_breaks_the_chain_at_the_next_line(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    _fill(path, 4)
    lines = path.read_bytes().splitlines(keepends=True)
    # Forge line 2 with a correct hash of its own: the chain still catches it at line 3.
    forged = Ledger(tmp_path / "other.jsonl")
    forged.open()
    forged.append("note", {"i": 0, "text": "entry 0"})
    forged.append("note", {"i": 1, "text": "forged"})
    lines[1] = (tmp_path / "other.jsonl").read_bytes().splitlines(keepends=True)[1]
    path.write_bytes(b"".join(lines))
    with pytest.raises(LedgerCorruptError, match=r"line [23]\b"):
        Ledger(path).open()


def test_missing_line_is_a_gap(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    _fill(path, 4)
    lines = path.read_bytes().splitlines(keepends=True)
    del lines[1]
    path.write_bytes(b"".join(lines))
    with pytest.raises(LedgerCorruptError, match=r"line 2\b"):
        Ledger(path).open()


def test_garbage_complete_line_is_corruption_not_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    _fill(path, 2)
    with path.open("ab") as handle:
        handle.write(b"not json at all\n")
    with pytest.raises(LedgerCorruptError, match=r"line 3\b"):
        Ledger(path).open()


def test_sync_picks_up_entries_appended_by_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    reader = Ledger(path)
    reader.open()
    writer = _fill(path, 3)
    new = reader.sync()
    assert [e.seq for e in new] == [1, 2, 3]
    assert reader.head == writer.head
    reader.append("note", {"i": "mine"})
    assert Ledger(path).open().seq == 4


def test_sync_rejects_a_ledger_that_shrank(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = _fill(path, 3)
    ledger.open()
    path.write_bytes(b"")
    with pytest.raises(LedgerCorruptError, match="shrank"):
        ledger.sync()


def test_unicode_and_surrogates_in_payload_survive(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    ledger.open()
    ledger.append("note", {"text": "héllo ✓ \udc80 \n tab\t"})
    (entry,) = list(_reopen(path).entries())
    assert entry.payload["text"] == "héllo ✓ \udc80 \n tab\t"


def _reopen(path: Path) -> Ledger:
    ledger = Ledger(path)
    ledger.open()
    return ledger


def _open_filled(path: Path, count: int) -> Ledger:
    ledger = Ledger(path)
    ledger.open()
    for i in range(count):
        ledger.append("note", {"i": i})
    return ledger


def test_a_ledger_knows_its_file_is_as_it_wrote_it_without_reading_it(tmp_path: Path) -> None:
    ledger = _open_filled(tmp_path / "ledger.jsonl", 3)
    assert ledger.as_written()
    ledger.append("note", {"i": 3})
    assert ledger.as_written()
    reopened = Ledger(tmp_path / "ledger.jsonl")
    reopened.open()
    assert reopened.as_written()


@pytest.mark.parametrize(
    "tamper",
    [
        # Same size, same place: only the change time tells.
        lambda path: path.write_bytes(path.read_bytes().replace(b'"i":1', b'"i":7')),
        lambda path: path.write_bytes(path.read_bytes()[:-10]),
        lambda path: path.write_bytes(path.read_bytes() + b'{"seq":99}\n'),
        lambda path: (path.unlink(), path.symlink_to("/dev/null")),
        lambda path: path.unlink(),
    ],
    ids=["rewritten-in-place", "truncated", "appended", "replaced-by-link", "removed"],
)
def test_a_changed_ledger_is_seen_and_put_back_byte_for_byte(tmp_path: Path, tamper: Any) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = _open_filled(path, 3)
    written = path.read_bytes()
    tamper(path)
    assert not ledger.as_written()
    assert not ledger.matches_file()
    ledger.restore_as_written()
    assert not path.is_symlink() and path.read_bytes() == written
    assert ledger.as_written()
    ledger.append("note", {"after": "restore"})
    assert Ledger(path, readonly=True).open().seq == 4


def test_an_append_does_not_make_a_foreign_change_look_like_its_own(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = _open_filled(path, 2)
    path.write_bytes(path.read_bytes().replace(b'"i":0', b'"i":5'))
    ledger.append("note", {"i": 2})
    assert not ledger.as_written()
    assert not ledger.matches_file()


def test_lines_another_process_appended_are_compared_once_then_trusted(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ours = _open_filled(path, 2)
    theirs = Ledger(path)
    theirs.open()
    theirs.append("note", {"from": "another process"})
    theirs.close()
    assert [entry.seq for entry in ours.sync()] == [3]
    assert not ours.as_written()  # the older lines are only known to be ours after a full comparison
    assert ours.matches_file()
    assert ours.as_written()


def _ledger(directory: Path) -> Ledger:
    ledger = Ledger(directory / "ledger.jsonl")
    ledger.open()
    return ledger


def _counting_fdatasync(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    synced: list[int] = []
    real = os.fdatasync

    def counted(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)
        real(fd)

    monkeypatch.setattr("autodev.state.ledger.os.fdatasync", counted)
    return synced


def test_an_entry_appended_without_durability_is_synced_by_the_next_durable_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record whose step's own change follows it is written without an fdatasync; the change's sync
    covers it (one file), so two entries cost one sync and both are on disk when the second returns."""
    ledger = _ledger(tmp_path)
    synced = _counting_fdatasync(monkeypatch)

    ledger.append("evidence_recorded", {"n": 1}, durable=False)
    ledger.append("evidence_recorded", {"n": 2}, durable=False)
    assert synced == []
    ledger.append("task_status", {"n": 3})

    size = (tmp_path / "ledger.jsonl").stat().st_size
    assert synced == [size]  # one sync, after all three lines were written
    assert [entry.payload["n"] for entry in ledger.entries()] == [1, 2, 3]


def test_closing_syncs_what_no_durable_append_followed_and_a_failed_sync_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = _ledger(tmp_path)
    synced = _counting_fdatasync(monkeypatch)
    ledger.append("delegation_decided", {"n": 1}, durable=False)
    ledger.close()
    assert synced == [(tmp_path / "ledger.jsonl").stat().st_size]
    ledger.close()  # nothing left to sync, no descriptor: a no-op
    assert len(synced) == 1

    reopened = _ledger(tmp_path)
    reopened.append("delegation_decided", {"n": 2}, durable=False)

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr("autodev.state.ledger.os.fdatasync", failing)
    with pytest.raises(StateError, match=r"Input/output error.*ledger verify"):
        reopened.close()
    monkeypatch.undo()
    assert [entry.payload["n"] for entry in reopened.entries()] == [1, 2]
