"""``FilesSettings``: the folders the file tools work in and the limits of every call."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FilesSettings"]


@dataclass(frozen=True)
class FilesSettings:
    """What ``read_file``, ``write_file``, ``patch`` and ``search_files`` may do.

    Built once per daemon run (``for_home`` from ``tools.files`` of config.yaml) and closed
    over by the tools, so a call never reads config.
    """

    #: the allowed folders; the first is where relative paths resolve (the workspace)
    roots: tuple[Path, ...]
    #: $HERMES_HOME: config, .env and state.db live there, so a write into it is asked about
    #: (a root under it, such as the workspace, is not)
    home: Path
    #: read_file returns at most this much text in one call
    max_read_bytes: int = 256 * 1024
    #: lines read_file returns when no limit is given
    default_read_lines: int = 2000
    #: a longer line is shown cut (read_file) or matched in its first part (search_files)
    max_line_chars: int = 2000
    #: read_file reads at most this much of a file to reach and show a range (a far offset in a
    #: large log, or a line of gigabytes, ends there: a second or so of disk, never memory)
    max_scan_bytes: int = 512 * 2**20
    #: write_file takes at most this much content
    max_write_bytes: int = 8 * 2**20
    #: patch loads files up to this size
    max_patch_bytes: int = 8 * 2**20
    #: search_files lists at most this many files (glob) ...
    max_search_files: int = 200
    #: ... and this many matching lines (regex)
    max_search_matches: int = 200
    #: search_files looks into files up to this size for a regex
    max_search_file_bytes: int = 4 * 2**20
    #: search_files visits at most this many folder entries
    max_search_entries: int = 50_000
    #: a search gives up after this many seconds, with what it found so far
    search_timeout: float = 10.0
    #: where secrets live besides ``home``; a write there is asked about even inside a root.
    #: None: the process user's ~/.ssh
    protected_extra: tuple[Path, ...] | None = None

    def __post_init__(self) -> None:
        if not self.roots:
            raise ValueError("FilesSettings needs at least one root")
        # Absolute once, so "inside a root" never depends on the daemon's working folder.
        object.__setattr__(self, "roots", tuple(Path(os.path.abspath(r)) for r in self.roots))
        object.__setattr__(self, "home", Path(os.path.abspath(self.home)))
        for name, value in vars(self).items():
            if name.startswith("max_") or name == "default_read_lines":
                if not isinstance(value, int) or value < 1:
                    raise ValueError(f"FilesSettings.{name} must be a positive integer, got {value!r}")
        if self.search_timeout <= 0:
            raise ValueError("FilesSettings.search_timeout must be positive")

    @property
    def protected(self) -> tuple[Path, ...]:
        """The folders a write into is asked about unless a root below them holds it."""
        extra = self.protected_extra
        if extra is None:
            try:
                extra = (Path.home() / ".ssh",)
            except RuntimeError:  # no HOME and no passwd entry: nothing to protect there
                extra = ()
        return (self.home, *extra)

    @classmethod
    def for_home(cls, home: Path, roots: Sequence[str] = (), *, max_read_kb: int = 256,
                 **limits: Any) -> FilesSettings:
        """From ``tools.files``: no roots is the workspace; a root may use ``~`` (the operator's
        own config, unlike a model's path) and a relative one is relative to ``home``."""
        folders = tuple(home / Path(os.path.expanduser(r)) for r in roots) or (home / "workspace",)
        return cls(roots=folders, home=home, max_read_bytes=max_read_kb * 1024, **limits)
