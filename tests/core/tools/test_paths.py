"""``core.tools.paths.resolve_path``: where a path leads, against real files and symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.tools import ToolError
from core.tools.paths import in_system_folder, resolve_path, within


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "a.txt").write_text("a")
    return ws


def test_relative_paths_resolve_in_the_first_root(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    r = resolve_path("sub/a.txt", (root, other))
    assert (r.real, r.root, r.exists, r.inside, r.climbs_out) == (root / "sub" / "a.txt", root, True, True, False)
    assert resolve_path("new/file.txt", (root,)).exists is False
    assert resolve_path("new/file.txt", (root,)).inside
    assert resolve_path(str(other / "x"), (root, other)).root == other


def test_dotdot_inside_is_fine_and_out_is_marked(root: Path, tmp_path: Path) -> None:
    assert resolve_path("sub/../sub/a.txt", (root,)).inside
    for climbing in ("../../etc/passwd", "../ws2/x", "sub/../../x", str(root / ".." / "x")):
        r = resolve_path(climbing, (root,))
        assert r.climbs_out and not r.inside, climbing
    # '..' that lands in another root is not an escape
    other = tmp_path / "other"
    other.mkdir()
    assert resolve_path("../other/x", (root, other)).inside


def test_absolute_paths_outside_are_outside(root: Path) -> None:
    r = resolve_path("/etc/passwd", (root,))
    assert (r.root, r.climbs_out, r.inside, r.through_symlink_out) == (None, False, False, False)


def test_symlinks_are_followed_to_where_they_lead(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("s")
    os.symlink(outside, root / "to-secret")
    os.symlink("/etc", root / "etc")
    os.symlink(root / "sub" / "a.txt", root / "inner")
    assert resolve_path("inner", (root,)).real == root / "sub" / "a.txt"
    r = resolve_path("to-secret", (root,))
    assert r.real == outside and not r.inside and r.through_symlink_out and not r.climbs_out
    assert resolve_path("etc/passwd", (root,)).real == Path("/etc/passwd").resolve()
    assert not resolve_path("etc/passwd", (root,)).inside
    # a symlink then '..': POSIX order (the link first), so it cannot be used to climb back in
    assert not resolve_path("etc/../etc/passwd", (root,)).inside


def test_a_dangling_symlink_leads_to_its_target(root: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "nowhere" / "f", root / "dangling")
    r = resolve_path("dangling", (root,))
    assert r.real == tmp_path / "nowhere" / "f" and not r.exists and not r.inside


def test_a_root_that_is_a_symlink_counts_by_its_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "alias")
    r = resolve_path("x.txt", (tmp_path / "alias",))
    assert r.inside and r.real == real / "x.txt"


@pytest.mark.parametrize("bad", ["", "a\x00b", "~", "~/notes.txt", "~root/.ssh/id_rsa"])
def test_no_path_at_all_is_refused(root: Path, bad: str) -> None:
    with pytest.raises(ToolError):
        resolve_path(bad, (root,))


def test_loops_and_files_used_as_folders_are_refused(root: Path) -> None:
    os.symlink(root / "loop", root / "loop")
    os.symlink(root / "b", root / "a")
    os.symlink(root / "a", root / "b")
    for bad in ("loop", "a", "loop/x", "sub/a.txt/x"):
        with pytest.raises(ToolError):
            resolve_path(bad, (root,))
    with pytest.raises(ToolError):
        resolve_path("x", ())


def test_unicode_names(root: Path) -> None:
    (root / "résumé ✓.txt").write_text("ok")
    r = resolve_path("résumé ✓.txt", (root,))
    assert r.exists and r.inside


def test_helpers() -> None:
    assert within(Path("/a/b"), Path("/a")) and within(Path("/a"), Path("/a"))
    assert not within(Path("/ab"), Path("/a"))
    assert in_system_folder(Path("/proc/self/environ")) and in_system_folder(Path("/dev/zero"))
    assert not in_system_folder(Path("/devices"))
