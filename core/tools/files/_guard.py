"""The one gate every file tool passes: may this path be read, or written, and who must say yes.

Reads are confined: a path whose real location (symlinks followed) is outside every root is
refused, and so are kernel folders (/proc, /sys, /dev), anything that is not a regular file,
and the protected folders (``$HERMES_HOME``: .env, config, state.db; ``~/.ssh``: keys) unless
a root *below* them holds the path (the workspace under ``$HERMES_HOME`` is the agent's own).
Writes are not confined but asked about: a write whose real location is outside the roots
(an absolute path elsewhere, a symlink in a root that leads out), or into a protected
folder, waits for the person's yes through ``require_approval``; nobody to ask means
refused. ``..`` that climbs out of the roots is refused outright for both: a model that
means a place outside names it plainly, and the person is asked about that name.
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import structlog

from .._base import ToolContext, ToolError
from ..approval import ApprovalRequest, require_approval
from ..paths import ResolvedPath, in_system_folder, real_roots, resolve_path, within
from ._settings import FilesSettings

log = structlog.get_logger("hermes.tools.files")

__all__ = [
    "Protection",
    "WriteTarget",
    "approve_write",
    "confine_read",
    "confine_write",
    "display_path",
    "plan_write",
    "protected_folder",
]


def _listing(settings: FilesSettings) -> str:
    return ", ".join(str(r) for r in settings.roots)


def display_path(real: Path, settings: FilesSettings) -> str:
    """How a path is shown to the model, so it can be given back as is: relative to the first
    root (where relative paths resolve) when inside it, else absolute. A name that is not UTF-8
    (bytes the system keeps as surrogates) is shown with U+FFFD: a lone surrogate in a tool
    result would fail the model request's encoding later."""
    first = real_roots(settings.roots[:1])[0]
    if within(real, first):
        shown = real.relative_to(first).as_posix() if real != first else "."
    else:
        shown = str(real)
    return os.fsencode(shown).decode("utf-8", "replace")


@dataclass(frozen=True)
class Protection:
    """The protected folders and the roots, real paths worked out once (a search asks per folder)."""

    roots: tuple[Path, ...]
    folders: tuple[Path, ...]

    @classmethod
    def of(cls, settings: FilesSettings) -> Protection:
        return cls(real_roots(settings.roots), real_roots(settings.protected))

    def folder_of(self, real: Path) -> Path | None:
        """The protected folder ``real`` is in, unless a root strictly below that folder holds it."""
        for folder in self.folders:
            if within(real, folder) and not any(
                    within(real, r) and within(r, folder) and r != folder for r in self.roots):
                return folder
        return None

    def may_enter(self, real_folder: Path) -> bool:
        """A search may walk into it: not protected, or a root lies below it (the workspace in
        ``$HERMES_HOME``; the files beside that root are still skipped one by one)."""
        return self.folder_of(real_folder) is None or any(
            within(r, real_folder) and r != real_folder for r in self.roots)


def protected_folder(real: Path, settings: FilesSettings) -> Path | None:
    """The protected folder (``$HERMES_HOME``, ~/.ssh) ``real`` is in, unless a root below it holds it."""
    return Protection.of(settings).folder_of(real)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _climbs(path: str, settings: FilesSettings) -> ToolError:
    return ToolError(f"{path!r} uses '..' to leave the allowed folders ({_listing(settings)}); that is refused. "
                     "Use a path inside them.")


def confine_read(path: str, settings: FilesSettings, *, folder: bool = False) -> tuple[Path, os.stat_result]:
    """The real path of an existing regular file (or, with ``folder``, a folder or file) inside the
    roots, and its stat. Never opens it. Blocking: call in a thread."""
    resolved = resolve_path(path, settings.roots)
    if resolved.climbs_out:
        raise _climbs(path, settings)
    if not resolved.inside:
        raise ToolError(f"{path!r} is outside the allowed folders ({_listing(settings)}); it cannot be read.")
    if in_system_folder(resolved.real):
        raise ToolError(f"{path!r} is a system folder (/proc, /sys, /dev); it is not read.")
    secret = protected_folder(resolved.real, settings)
    if secret is not None:
        raise ToolError(f"{path!r} is in {secret}, where secrets and the gateway's own files live; it is not read.")
    if not resolved.exists:
        raise ToolError(f"There is no {'file or folder' if folder else 'file'} at {path!r}.")
    try:
        st = os.stat(resolved.real)
    except OSError as exc:
        raise ToolError(f"{path!r} cannot be read ({exc.strerror or type(exc).__name__}).") from None
    if stat.S_ISREG(st.st_mode) or (folder and stat.S_ISDIR(st.st_mode)):
        return resolved.real, st
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path!r} is a folder. List it with search_files(path={path!r}, pattern='*'), "
                        "then read a file in it.")
    raise ToolError(f"{path!r} is {_kind(st.st_mode)}; only regular files are read.")


@dataclass(frozen=True)
class WriteTarget:
    """Where a write goes, and why a person must approve it first (None: no need)."""

    real: Path
    #: the file there now (its mode is kept), or None for a new file
    existing: os.stat_result | None
    reason: str | None


def _reason(resolved: ResolvedPath, settings: FilesSettings) -> str | None:
    reason = None
    if resolved.through_symlink_out:
        reason = "a write outside the allowed folders, through a symlink inside them"
    elif not resolved.inside:
        reason = "a write outside the allowed folders"
    folder = protected_folder(resolved.real, settings)
    if folder is None:
        return reason
    # the person should know this one reaches secrets (.env, keys), not just "elsewhere"
    secrets = f"into {folder}, where secrets and the gateway's own files live"
    return f"{reason}, {secrets}" if reason else f"a write {secrets}"


def plan_write(path: str, settings: FilesSettings) -> WriteTarget:
    """Where a write of ``path`` goes. Refuses what no approval makes sane: ``..`` out of the
    roots, system folders, a folder or a special file at the path. Blocking: call in a thread."""
    resolved = resolve_path(path, settings.roots)
    if resolved.climbs_out:
        raise _climbs(path, settings)
    if in_system_folder(resolved.real):
        raise ToolError(f"{path!r} is in a system folder (/proc, /sys, /dev); it is never written.")
    existing: os.stat_result | None = None
    if resolved.exists:
        try:
            existing = os.stat(resolved.real)
        except OSError as exc:
            raise ToolError(f"{path!r} cannot be written ({exc.strerror or type(exc).__name__}).") from None
        if stat.S_ISDIR(existing.st_mode):
            raise ToolError(f"{path!r} is a folder; give a file's path.")
        if not stat.S_ISREG(existing.st_mode):
            raise ToolError(f"{path!r} is {_kind(existing.st_mode)}; only regular files are written.")
    return WriteTarget(real=resolved.real, existing=existing, reason=_reason(resolved, settings))


async def approve_write(ctx: ToolContext, target: WriteTarget, tool: str, verb: str) -> None:
    """The person's yes when ``target`` needs one (``ToolError`` when not given, or nobody can be asked)."""
    if target.reason is None:
        return
    log.info("tools.files.approval_asked", tool=tool, path=str(target.real), reason=target.reason,
             session_id=ctx.session_id)
    decision = await require_approval(ctx, ApprovalRequest(
        tool=tool, action=f"{verb} {target.real}", reason=target.reason, pattern=f"{tool}:{target.real}"))
    log.info("tools.files.approved", tool=tool, path=str(target.real), why=decision.why, session_id=ctx.session_id)


async def confine_write(ctx: ToolContext, settings: FilesSettings, tool: str, verb: str,
                        path: str) -> WriteTarget:
    """``plan_write`` (in a thread), then ``approve_write``."""
    target = await asyncio.to_thread(plan_write, path, settings)
    await approve_write(ctx, target, tool, verb)
    return target
