"""``autodev.files``: a bounded read of a regular file, and a one-line refusal of everything else.

The hostile files are real: FIFOs made with ``os.mkfifo`` (nothing ever writes to them, so a blocking open
or read would hang the test), and symbolic links to the endless character devices ``/dev/zero`` and
``/dev/urandom``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from autodev.errors import AutodevError, ConfigError, StateError
from autodev.files import (
    GIB,
    KIB,
    MIB,
    format_size,
    led_by,
    open_regular,
    read_bounded,
    read_bounded_text,
)

ENDLESS_DEVICES = ["/dev/zero", "/dev/urandom"]


def read(
    path: Path,
    *,
    limit: int = KIB,
    follow_symlinks: bool = False,
    limit_name: str | None = None,
    remedy: str = "replace it with the real file",
) -> bytes:
    return read_bounded(
        path,
        limit=limit,
        what="the test file",
        follow_symlinks=follow_symlinks,
        error=led_by(path, StateError),
        limit_name=limit_name,
        remedy=remedy,
    )


def refusal(call: Callable[[], object]) -> str:
    with pytest.raises(StateError) as raised:
        call()
    message = raised.value.message
    assert "\n" not in message
    return message


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_a_regular_file_is_read_whole_up_to_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "exact"
    path.write_bytes(b"x" * KIB)

    assert read(path) == b"x" * KIB


def test_one_byte_past_the_limit_is_refused_naming_the_file_and_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * (KIB + 1))

    message = refusal(lambda: read(path))

    assert message.startswith(f"{path}: the test file is larger than 1 KiB")
    assert "replace it with the real file" in message


def test_a_configurable_limit_is_named_so_that_it_can_be_raised(tmp_path: Path) -> None:
    path = tmp_path / "answer.json"
    path.write_bytes(b"x" * (4 * MIB + 1))

    message = refusal(lambda: read(path, limit=4 * MIB, limit_name="inline.max_answer_bytes"))

    assert "larger than 4 MiB (limit inline.max_answer_bytes)" in message
    assert "raise inline.max_answer_bytes" in message


def test_a_file_that_grows_after_it_was_opened_is_read_no_further_than_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "growing"
    path.write_bytes(b"x" * 10)
    real_read = os.read
    read_so_far = 0

    def grow_then_read(fd: int, size: int) -> bytes:
        nonlocal read_so_far
        if read_so_far == 0:
            with path.open("ab") as handle:
                handle.write(b"y" * (8 * MIB))
        data = real_read(fd, size)
        read_so_far += len(data)
        return data

    monkeypatch.setattr(os, "read", grow_then_read)
    with pytest.raises(StateError, match="larger than 1 MiB"):
        read(path, limit=MIB)
    monkeypatch.undo()

    assert read_so_far == MIB + 1


@pytest.mark.parametrize("follow_symlinks", [False, True], ids=["no-follow", "follow"])
def test_a_fifo_is_refused_at_once(fifo: Path, follow_symlinks: bool) -> None:
    message = refusal(lambda: read(fifo, follow_symlinks=follow_symlinks))

    assert message == (
        f"{fifo}: the test file is a FIFO (named pipe), not a regular file; replace it with the real file"
    )


@pytest.mark.parametrize("device", ENDLESS_DEVICES)
def test_a_link_to_an_endless_device_is_refused_as_a_link_when_links_are_not_followed(
    tmp_path: Path, device: str
) -> None:
    link = tmp_path / "state.json"
    link.symlink_to(device)

    message = refusal(lambda: read(link, limit=GIB))

    assert "the test file is a symbolic link, not a regular file" in message


@pytest.mark.parametrize("device", ENDLESS_DEVICES)
def test_a_link_to_an_endless_device_is_refused_as_a_device_when_links_are_followed(
    tmp_path: Path, device: str
) -> None:
    link = tmp_path / "plan.md"
    link.symlink_to(device)

    message = refusal(lambda: read(link, limit=GIB, follow_symlinks=True))

    assert "the test file is a character device, not a regular file" in message


def test_a_link_to_a_fifo_is_refused_when_links_are_followed(tmp_path: Path, fifo: Path) -> None:
    link = tmp_path / "script.toml"
    link.symlink_to(fifo)

    assert "is a FIFO (named pipe)" in refusal(lambda: read(link, follow_symlinks=True))


def test_a_link_to_a_regular_file_is_read_only_when_links_are_followed(tmp_path: Path) -> None:
    target = tmp_path / "real.md"
    target.write_bytes(b"content")
    link = tmp_path / "link.md"
    link.symlink_to(target)

    assert read(link, follow_symlinks=True) == b"content"
    assert "is a symbolic link" in refusal(lambda: read(link))


def test_a_dangling_link_is_refused_as_a_link_or_missing_when_followed(tmp_path: Path) -> None:
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nothing")

    assert "is a symbolic link" in refusal(lambda: read(link))
    with pytest.raises(FileNotFoundError):
        read(link, follow_symlinks=True)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    assert "the test file is a directory, not a regular file" in refusal(lambda: read(tmp_path))


def test_a_missing_file_is_left_to_the_caller(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read(tmp_path / "absent")


def test_the_remedy_is_the_callers(fifo: Path) -> None:
    message = refusal(lambda: read(fifo, remedy="delete it (it is rebuilt)"))

    assert message.endswith("not a regular file; delete it (it is rebuilt)")


def test_an_error_type_that_names_the_file_itself_gets_the_message_without_the_path(fifo: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        read_bounded(
            fifo,
            limit=KIB,
            what="the configuration file",
            follow_symlinks=True,
            error=lambda problem: ConfigError(problem, source=str(fifo)),
        )

    assert raised.value.source == str(fifo)
    assert raised.value.message == (
        f"{fifo}: the configuration file is a FIFO (named pipe), not a regular file; replace it with the "
        "real file"
    )


def test_open_regular_hands_back_a_descriptor_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    path.write_bytes(b"line\n")

    fd = open_regular(path, what="the ledger", follow_symlinks=False, error=led_by(path, StateError))
    try:
        assert os.read(fd, 100) == b"line\n"
    finally:
        os.close(fd)


def test_text_with_a_byte_order_mark_is_decoded_without_it(tmp_path: Path) -> None:
    path = tmp_path / "bom.md"
    path.write_bytes("\ufeff# Plan: é\n".encode())

    text = read_bounded_text(
        path,
        limit=KIB,
        what="the plan",
        follow_symlinks=True,
        error=led_by(path, StateError),
        encoding="utf-8-sig",
    )

    assert text == "# Plan: é\n"


def test_text_that_is_not_utf8_is_refused_naming_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "latin1.md"
    path.write_bytes(b"abc\xe9")

    def decode() -> str:
        return read_bounded_text(
            path, limit=KIB, what="the plan", follow_symlinks=True, error=led_by(path, StateError)
        )

    assert refusal(decode) == (f"{path}: the plan is not UTF-8 text (bad byte at offset 3); save it as UTF-8")


def test_every_refusal_is_the_callers_error_type(fifo: Path) -> None:
    class Custom(AutodevError):
        pass

    with pytest.raises(Custom):
        read_bounded(fifo, limit=KIB, what="x", follow_symlinks=False, error=Custom)


@pytest.mark.parametrize(
    ("size", "text"),
    [(4 * MIB, "4 MiB"), (GIB, "1 GiB"), (16 * KIB, "16 KiB"), (1500, "1500 bytes"), (0, "0 bytes")],
)
def test_sizes_are_written_as_people_read_them(size: int, text: str) -> None:
    assert format_size(size) == text
