"""AutoDev's own commits written into the object store without starting git.

A task costs two commits (its own, and its replay onto the branch), and each ``git commit-tree`` is a
process of a few milliseconds on the path from an agent's last answer to the dependents' start. A commit
object is a few lines of text: this module writes it as git would, as a loose object, byte for byte what
``git commit-tree <tree> -p <parent> -m <message>`` writes at the same moment. The same identity and
clock give the reflog line of a landing's fast-forward (``autodev.workspace.refs.advance_branch``).

Only where the result is certain to be the same. What the commit says of its author and committer is what
git itself answered once (``git var GIT_AUTHOR_IDENT`` and ``GIT_COMMITTER_IDENT``: the configuration,
``includeIf``, the environment and git's own fallbacks, all applied by git), with the current time in place
of git's. Git is asked instead whenever something git would do differently is set: fixed dates or another
identity in the environment, another object directory, a shared repository's permissions, objects synced
to disk, a commit encoding other than UTF-8, a second object format, or arguments that are not full
object ids.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "IDENTITY_ENVIRONMENT",
    "CommitWriter",
    "blocking_settings",
    "commit_body",
    "content_settings",
    "git_timezone",
    "object_id",
    "patch_settings",
]

# The environment that changes what git writes into a commit: while any of these differs from what it was
# when git's answer was taken, git writes the commit.
IDENTITY_ENVIRONMENT = (
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "EMAIL",
    "GIT_OBJECT_DIRECTORY",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "HOME",
    "XDG_CONFIG_HOME",
    "TZ",
)
# Environment under which git's own dates are fixed: its commits are not "now".
_FIXED_DATES = ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")
_IDENT = re.compile(r"(?P<who>[^\n<>]*<[^\n<>]*>) (?P<seconds>\d+) (?P<zone>[+-]\d{4})")
_HASH_BY_LENGTH = {40: "sha1", 64: "sha256"}
_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# zlib level git uses for loose objects when the configuration names none (Z_BEST_SPEED).
_LOOSE_COMPRESSION = 1
_FALSE_VALUES = ("false", "no", "off", "0")
_TRUE_VALUES = ("true", "yes", "on", "1")


def _read_by_git(environment: Mapping[str, str]) -> tuple[tuple[str, str | None], ...]:
    """What of ``environment`` git reads for a commit: ``IDENTITY_ENVIRONMENT`` and the numbered settings
    ``GIT_CONFIG_COUNT`` adds (``GIT_CONFIG_KEY_<n>``, ``GIT_CONFIG_VALUE_<n>``)."""
    named = [(name, environment.get(name)) for name in IDENTITY_ENVIRONMENT]
    numbered = sorted(
        (name, value)
        for name, value in environment.items()
        if name.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    )
    return (*named, *numbered)


def git_timezone(seconds: int) -> str:
    """The local UTC offset at ``seconds`` as git writes it: ``+0100``, ``-0530``."""
    offset = time.localtime(seconds).tm_gmtoff
    sign = "+" if offset >= 0 else "-"
    minutes = abs(offset) // 60
    return f"{sign}{minutes // 60:02d}{minutes % 60:02d}"


def object_id(kind: bytes, body: bytes, *, id_length: int) -> str:
    """The id git gives the object of type ``kind`` (``blob``, ``tree``, ``commit``) with ``body``, in the
    format whose ids are ``id_length`` hex digits long."""
    found = hashlib.new(_HASH_BY_LENGTH[id_length], b"%s %d\0" % (kind, len(body)))
    found.update(body)
    return found.hexdigest()


def commit_body(tree: str, parent: str, author: str, committer: str, message: str) -> bytes:
    """The commit object ``git commit-tree <tree> -p <parent> -m <message>`` writes (without its header):
    ``author`` and ``committer`` are whole ident lines (``Name <email> seconds zone``); ``-m`` ends the
    message with a newline."""
    text = message if message.endswith("\n") or not message else message + "\n"
    lines = f"tree {tree}\nparent {parent}\nauthor {author}\ncommitter {committer}\n\n{text}"
    return lines.encode("utf-8", errors="surrogateescape")


def blocking_settings(config: Mapping[str, str]) -> list[str]:
    """The settings of ``config`` (git's keys, lower case) under which git would write a commit object
    otherwise than ``CommitWriter`` does."""
    blocking = []
    shared = config.get("core.sharedrepository", "").lower()
    if shared not in ("", "false", "umask", "0", "no", "off"):
        blocking.append("core.sharedRepository")  # other permissions on the object files
    for key in ("core.fsyncobjectfiles", "core.fsync"):
        if key in config:
            blocking.append(key)  # objects synced to disk
    encoding = config.get("i18n.commitencoding", "utf-8").lower().replace("_", "-")
    if encoding not in ("utf-8", "utf8"):
        blocking.append("i18n.commitEncoding")  # an "encoding" header
    if "extensions.compatobjectformat" in config:
        blocking.append("extensions.compatObjectFormat")  # each object written in two formats
    return blocking


def content_settings(config: Mapping[str, str]) -> list[str]:
    """The settings of ``config`` (``git config --list``, lower-case keys) under which ``git add`` may
    store a file otherwise than as its bytes, or give it another mode than its own."""
    found = [key for key in ("core.eol", "core.attributesfile") if key in config]
    if config.get("core.autocrlf", "false").lower() not in _FALSE_VALUES:
        found.append("core.autocrlf")
    for key in ("core.filemode", "core.symlinks"):
        if config.get(key, "true").lower() not in _TRUE_VALUES:
            found.append(key)  # an empty value is false to git
    if config.get("core.sparsecheckout", "false").lower() not in _FALSE_VALUES:
        found.append("core.sparseCheckout")
    if config.get("extensions.worktreeconfig", "false").lower() not in _FALSE_VALUES:
        found.append("extensions.worktreeConfig")  # a worktree's own settings, not in this listing
    return found


# ``diff.*`` settings that leave the patch of a new text file as AutoDev asks git for it: they concern
# context lines, rename detection, colour, statistics or other commands, or what every patch AutoDev records
# sets itself (its prefixes, git's own order); ``diff.relative`` changes nothing at the top of the working
# tree, where git runs. Any other one (``diff.suppressBlankEmpty``, one unknown here) sends the diff to git.
_PATCH_NEUTRAL = frozenset(
    {
        "diff.algorithm",
        "diff.autorefreshindex",
        "diff.colormoved",
        "diff.colormovedws",
        "diff.context",
        "diff.dirstat",
        "diff.dstprefix",
        "diff.external",  # every diff AutoDev runs passes --no-ext-diff
        "diff.guitool",
        "diff.ignoresubmodules",
        "diff.indentheuristic",
        "diff.interhunkcontext",
        "diff.mnemonicprefix",
        "diff.noprefix",
        "diff.orderfile",
        "diff.relative",
        "diff.renamelimit",
        "diff.renames",
        "diff.srcprefix",
        "diff.statgraphwidth",
        "diff.statnamewidth",
        "diff.submodule",
        "diff.tool",
        "diff.wserrorhighlight",
    }
)


def patch_settings(config: Mapping[str, str]) -> list[str]:
    """The settings of ``config`` (``git config --list``, lower-case keys) under which ``git diff``, run as
    AutoDev runs it for a patch (no colour, its own prefixes, git's order, at the top of the working tree),
    may write a new text file's patch otherwise than ``autodev.workspace.patches`` does. A diff driver's own
    settings (``diff.<driver>.*``) apply only through an attribute, and attribute files are looked for
    separately."""
    found = [
        key for key in config if key.startswith("diff.") and key.count(".") == 1 and key not in _PATCH_NEUTRAL
    ]
    if "core.bigfilethreshold" in config:
        found.append("core.bigFileThreshold")  # a file above it is binary to git's diff
    return found


def _reflogs(config: Mapping[str, str]) -> str | None:
    """How git keeps a branch's and HEAD's reflogs in a repository with a work tree, by
    ``core.logAllRefUpdates`` (unset: kept); None for a bare repository or a value not known here."""
    if config.get("core.bare", "false").lower() not in _FALSE_VALUES:
        return None
    setting = config.get("core.logallrefupdates", "true").lower()
    if setting in (*_TRUE_VALUES, "always"):
        return "create"
    if setting in _FALSE_VALUES:
        return "existing"
    return None


@dataclass(frozen=True, slots=True)
class CommitWriter:
    """Writes commit objects into ``objects_dir`` as git would, for the identities git gave."""

    objects_dir: Path
    author: str  # ``Name <email>``, as git's ident has it
    committer: str
    compression: int
    environment: tuple[tuple[str, str | None], ...]  # what git read of it when its answer was taken
    # Reflogs of the branch and HEAD when the branch moves (``core.logAllRefUpdates``): "create" them,
    # append to "existing" ones only, or None where git must move the branch itself.
    reflogs: str | None
    # Whether the configuration lets ``git add`` store a file as its bytes, with its own mode
    # (``content_settings``; attribute files are looked for by ``autodev.workspace.stored_files``).
    stores_files_as_read: bool = False
    # Whether it leaves a new text file's patch in the form ``autodev.workspace.patches`` writes
    # (``patch_settings``).
    writes_plain_patches: bool = False

    @classmethod
    def from_git(
        cls,
        objects_dir: Path,
        author_ident: str,
        committer_ident: str,
        config: Mapping[str, str],
        environment: Mapping[str, str],
    ) -> CommitWriter | None:
        """A writer from git's answers (``git var`` idents, ``git config --list`` as a mapping of lower-case
        keys), or None when git would write differently than this writer does."""
        author = _IDENT.fullmatch(author_ident.strip())
        committer = _IDENT.fullmatch(committer_ident.strip())
        if author is None or committer is None or blocking_settings(config):
            return None
        if any(environment.get(name) for name in _FIXED_DATES) or environment.get("GIT_OBJECT_DIRECTORY"):
            return None
        level = config.get("core.loosecompression", config.get("core.compression"))
        try:
            compression = _LOOSE_COMPRESSION if level is None else int(level)
        except ValueError:
            return None
        if not -1 <= compression <= 9:
            return None
        # The C library's zone follows the environment's ``TZ`` as git's does (it is read once per process
        # otherwise); ``still_valid`` hands the commits to git if ``TZ`` changes after this.
        time.tzset()
        return cls(
            objects_dir,
            author.group("who"),
            committer.group("who"),
            compression,
            _read_by_git(environment),
            _reflogs(config),
            stores_files_as_read=not content_settings(config),
            writes_plain_patches=not patch_settings(config),
        )

    def still_valid(self, environment: Mapping[str, str]) -> bool:
        """Whether git would still give the same identities: the environment it read is unchanged."""
        return self.environment == _read_by_git(environment)

    def reflog_line(self, old: str, new: str, message: str, *, now: int | None = None) -> bytes:
        """The reflog entry git writes for a ref moved from ``old`` to ``new`` with ``message`` now."""
        seconds = int(time.time()) if now is None else now
        line = f"{old} {new} {self.committer} {seconds} {git_timezone(seconds)}\t{message}\n"
        return line.encode("utf-8", errors="surrogateescape")

    def write(self, tree: str, parent: str, message: str, *, now: int | None = None) -> str | None:
        """The id of a commit of ``tree`` on ``parent`` with ``message``, written now (the object is
        written once; an identical one already stored is kept). None when the ids are not full object ids
        of one format: git resolves anything else."""
        if not (_OBJECT_ID.fullmatch(tree) and _OBJECT_ID.fullmatch(parent)) or len(tree) != len(parent):
            return None
        seconds = int(time.time()) if now is None else now
        stamp = f"{seconds} {git_timezone(seconds)}"
        body = commit_body(tree, parent, f"{self.author} {stamp}", f"{self.committer} {stamp}", message)
        return self.write_object(b"commit", body, id_length=len(tree))

    def write_object(self, kind: bytes, body: bytes, *, id_length: int) -> str:
        """The id of the object of type ``kind`` (``commit``, ``tree``) with ``body``, in the format whose
        ids are ``id_length`` hex digits long, written as a loose object as git writes it."""
        found = object_id(kind, body, id_length=id_length)
        self._store(found, zlib.compress(b"%s %d\0" % (kind, len(body)) + body, self.compression))
        return found

    def _store(self, object_id: str, compressed: bytes) -> None:
        """Write a loose object as git does: a temporary file in its fan-out directory, read-only, linked
        to its name (an object of that name is the same object: it is left as it is)."""
        directory = self.objects_dir / object_id[:2]
        directory.mkdir(exist_ok=True)
        target = directory / object_id[2:]
        if target.exists():
            return
        fd, temporary = tempfile.mkstemp(prefix="tmp_obj_", dir=directory)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(compressed)
            os.chmod(temporary, 0o444)
            with contextlib.suppress(FileExistsError):  # written meanwhile by git: the same bytes
                os.link(temporary, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
