"""Where a path the model gave really leads, and whether that is inside the folders a tool may use.

Shared by ``send_file`` and the file tools: each caller decides what to refuse, this module
only says where a path goes. A relative path is relative to the first root; ``~`` is *not*
expanded (it is refused: a model writing ``~/notes`` means the user's home, and guessing
whose home silently would either miss or reach past the roots). The real path follows
every symlink (``os.path.realpath``), so a link inside a root that leads out is seen as
the place it leads to; ``climbs_out`` separately marks a path whose ``..`` parts alone,
before any symlink, leave the roots, which callers refuse outright.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ._base import ToolError

__all__ = ["SYSTEM_FOLDERS", "ResolvedPath", "in_system_folder", "real_roots", "resolve_path", "within"]

#: kernel views, not files: /proc/self/environ holds the daemon's secrets, /dev/zero never
#: ends, and a FIFO or a device blocks or has effects when opened
SYSTEM_FOLDERS = (Path("/proc"), Path("/sys"), Path("/dev"))


@dataclass(frozen=True)
class ResolvedPath:
    """A path as given, and the place it leads to."""

    given: str
    #: every symlink followed, ``..`` applied after them (for a missing file: its existing
    #: folder's real path with the rest of the name)
    real: Path
    #: the path with ``..`` applied by text only, no symlink followed
    lexical: Path
    #: the real root that holds ``real``; None when it is outside every root
    root: Path | None
    exists: bool
    #: ``..`` alone leads outside every root
    climbs_out: bool
    #: the path as written (``lexical``) is inside a root
    written_inside: bool

    @property
    def inside(self) -> bool:
        return self.root is not None and not self.climbs_out

    @property
    def through_symlink_out(self) -> bool:
        """The path, as written, is inside a root, but a symlink on the way leads out of them."""
        return self.root is None and self.written_inside


def within(path: Path, folder: Path) -> bool:
    """``path`` is ``folder`` or below it (both already absolute and normalised)."""
    return path == folder or path.is_relative_to(folder)


def real_roots(roots: Sequence[Path]) -> tuple[Path, ...]:
    return tuple(Path(os.path.realpath(root)) for root in roots)


def in_system_folder(real: Path) -> bool:
    return any(within(real, folder) for folder in SYSTEM_FOLDERS)


def resolve_path(path: str, roots: Sequence[Path]) -> ResolvedPath:
    """Where ``path`` leads. Raises ``ToolError`` for what is no path at all: empty, a NUL byte,
    ``~``, a symlink loop, a file used as a folder, a name the system refuses. Does blocking IO."""
    if not roots:
        raise ToolError("No folder is open to the file tools here.")
    if not path or "\x00" in path:
        raise ToolError("'path' is empty or not a valid path.")
    if path.startswith("~"):
        raise ToolError(f"{path!r}: '~' is not expanded here. Give a path relative to {roots[0]} "
                        "or an absolute path.")
    candidate = Path(path) if os.path.isabs(path) else Path(roots[0]) / path
    lexical = Path(os.path.normpath(candidate))
    given_roots = tuple(Path(os.path.normpath(Path(r).absolute())) for r in roots)
    reals = real_roots(roots)
    written_inside = any(within(lexical, r) for r in (*given_roots, *reals))
    climbs_out = ".." in Path(path).parts and not written_inside
    real = Path(os.path.realpath(candidate))
    try:
        os.stat(real)
        exists = True
    except FileNotFoundError:
        exists = False
    except NotADirectoryError:
        raise ToolError(f"{path!r}: a part of it is a file, not a folder.") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolError(f"{path!r} is a symlink loop; it leads nowhere.") from None
        raise ToolError(f"{path!r} cannot be looked up ({exc.strerror or type(exc).__name__}).") from None
    root = next((r for r in reals if within(real, r)), None)
    return ResolvedPath(given=path, real=real, lexical=lexical, root=root, exists=exists, climbs_out=climbs_out,
                        written_inside=written_inside)
