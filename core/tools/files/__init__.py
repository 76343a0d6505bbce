"""The agent's file tools: ``read_file``, ``write_file``, ``patch``, ``search_files``.

``file_tools(FilesSettings)`` gives the four ``Tool``s (toolset "files"; the writing two are
tagged "writes"). Every path goes through one gate (``_guard``): reads stay inside the
allowed folders, writes elsewhere (or into ``$HERMES_HOME`` / ``~/.ssh``) ask the person first,
``..`` out of the folders and ``~`` are refused, special files are never opened. Disk work
runs in threads; a file is streamed, never loaded whole, except by patch (capped).
"""

from ._guard import (
    WriteTarget,
    approve_write,
    confine_read,
    confine_write,
    display_path,
    plan_write,
    protected_folder,
)
from ._settings import FilesSettings
from ._tools import FILES_TOOLSET, WRITES_TAG, file_tools

__all__ = [
    "FILES_TOOLSET",
    "WRITES_TAG",
    "FilesSettings",
    "WriteTarget",
    "approve_write",
    "confine_read",
    "confine_write",
    "display_path",
    "file_tools",
    "plan_write",
    "protected_folder",
]
