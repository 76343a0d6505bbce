"""The gate itself: confine_read, plan_write, protected_folder, display_path, with roots that
reach system folders and $HERMES_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.tools import ToolError
from core.tools.files import FilesSettings, confine_read, display_path, plan_write, protected_folder


def test_system_folders_are_refused_even_inside_a_root(home: Path) -> None:
    everything = FilesSettings(roots=(Path("/"),), home=home)
    for path in ("/proc/self/environ", "/proc/1/cmdline", "/sys/kernel/hostname", "/dev/null"):
        with pytest.raises(ToolError, match="system folder"):
            confine_read(path, everything)
        with pytest.raises(ToolError, match="system folder"):
            plan_write(path, everything)


def test_confine_read_gives_the_real_path_and_stat(ws: Path, settings: FilesSettings) -> None:
    (ws / "a.txt").write_text("abc")
    real, st = confine_read("a.txt", settings)
    assert real == ws / "a.txt" and st.st_size == 3
    real, st = confine_read(".", settings, folder=True)
    assert real == ws
    with pytest.raises(ToolError, match="is a folder"):
        confine_read(".", settings)


def test_protected_folders(home: Path, ws: Path, ssh: Path, settings: FilesSettings) -> None:
    assert protected_folder(home / ".env", settings) == home
    assert protected_folder(home / "memories" / "MEMORY.md", settings) == home
    assert protected_folder(ssh / "id_ed25519", settings) == ssh
    assert protected_folder(ws / "x", settings) is None  # a root below $HERMES_HOME: the agent's own
    assert protected_folder(Path("/srv/x"), settings) is None
    # a root that *is* $HERMES_HOME does not make its secrets the agent's
    whole_home = FilesSettings(roots=(home,), home=home, protected_extra=())
    assert protected_folder(home / ".env", whole_home) == home


def test_plan_write_reasons(home: Path, ws: Path, tmp_path: Path, settings: FilesSettings) -> None:
    assert plan_write("new/x.txt", settings).reason is None
    assert plan_write("new/x.txt", settings).existing is None
    assert plan_write(str(tmp_path / "x"), settings).reason == "a write outside the allowed folders"
    assert "secrets" in (plan_write(str(home / ".env"), settings).reason or "")


def test_display_path(ws: Path, tmp_path: Path, settings: FilesSettings) -> None:
    assert display_path(ws / "a" / "b.txt", settings) == "a/b.txt"
    assert display_path(ws, settings) == "."
    assert display_path(tmp_path / "x", settings) == str(tmp_path / "x")


def test_protected_folders_are_not_read_even_inside_a_root(home: Path, ws: Path, ssh: Path, tmp_path: Path) -> None:
    ssh.mkdir(parents=True)
    (ssh / "id_ed25519").write_text("PRIVATE KEY")
    (home / ".env").write_text("TELEGRAM_BOT_TOKEN=123:abc")
    (ws / "ok.txt").write_text("fine")
    wide = FilesSettings(roots=(tmp_path,), home=home, protected_extra=(ssh,))
    for path in (str(ssh / "id_ed25519"), str(home / ".env"), "hermes/.env", "userhome/.ssh/id_ed25519"):
        with pytest.raises(ToolError, match="secrets"):
            confine_read(path, wide)
    assert confine_read("hermes/workspace/ok.txt", FilesSettings(roots=(tmp_path, ws), home=home))[0] == ws / "ok.txt"
