"""patch: exact, unique search/replace with a diff; ambiguity and misses refused with help."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from core.tools import ToolContext, ToolRegistry

from ._env import ScriptedApprover, call, with_approver

SOURCE = "def greet(name):\n    print('hello', name)\n\n\ndef part(name):\n    print('bye', name)\n"


async def test_a_unique_match_is_replaced_with_a_diff(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "app.py").write_text(SOURCE)
    (ws / "app.py").chmod(0o755)
    ok, text = await call(registry, ctx, "patch", path="app.py", old_string="print('hello', name)",
                          new_string="print('hi', name)")
    assert ok, text
    result = json.loads(text)
    assert result["replacements"] == 1 and result["path"] == "app.py"
    assert "-    print('hello', name)\n+    print('hi', name)\n" in result["diff"]
    assert result["diff"].startswith("--- a/app.py\n+++ b/app.py\n@@")
    assert (ws / "app.py").read_text() == SOURCE.replace("hello", "hi")
    assert stat.S_IMODE((ws / "app.py").stat().st_mode) == 0o755


async def test_several_matches_are_refused_with_their_lines(registry: ToolRegistry, ctx: ToolContext,
                                                            ws: Path) -> None:
    (ws / "app.py").write_text(SOURCE)
    ok, text = await call(registry, ctx, "patch", path="app.py", old_string="name)", new_string="who)")
    assert not ok and "occurs 4 times" in text and "lines 1, 2, 5, 6" in text and "replace_all" in text
    assert (ws / "app.py").read_text() == SOURCE
    ok, text = await call(registry, ctx, "patch", path="app.py", old_string="name)", new_string="who)",
                          replace_all=True)
    assert ok and json.loads(text)["replacements"] == 4 and "name)" not in (ws / "app.py").read_text()


async def test_no_match_shows_the_nearest_lines(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "app.py").write_text(SOURCE)
    ok, text = await call(registry, ctx, "patch", path="app.py", old_string="  print('helo', nme)",
                          new_string="x")
    assert not ok and "was not found" in text and "most similar" in text
    assert "     2\t    print('hello', name)" in text
    ok, text = await call(registry, ctx, "patch", path="app.py", old_string="zzzz qqqq", new_string="x")
    assert not ok and "was not found" in text and "most similar" not in text
    assert (ws / "app.py").read_text() == SOURCE


async def test_line_endings_and_unicode_survive(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "dos.txt").write_bytes("α one\r\nβ two\r\nγ three".encode())
    ok, _ = await call(registry, ctx, "patch", path="dos.txt", old_string="β two", new_string="β 2")
    assert ok and (ws / "dos.txt").read_bytes() == "α one\r\nβ 2\r\nγ three".encode()


async def test_what_patch_will_not_do(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "a.txt").write_text("abc\n")
    (ws / "bin.dat").write_bytes(b"\x00\x01abc\x02")
    cases = [
        ({"path": "a.txt", "old_string": "", "new_string": "x"}, "'old_string' is empty"),
        ({"path": "a.txt", "old_string": "abc", "new_string": "abc"}, "the same"),
        ({"path": "missing.txt", "old_string": "a", "new_string": "b"}, "create it with write_file"),
        ({"path": "bin.dat", "old_string": "abc", "new_string": "x"}, "not a text file"),
        ({"path": "../../etc/passwd", "old_string": "root", "new_string": "x"}, "'..'"),
        ({"path": ".", "old_string": "a", "new_string": "b"}, "is a folder"),
    ]
    for args, expected in cases:
        ok, text = await call(registry, ctx, "patch", **args)
        assert not ok and expected in text, (args, text)
    assert (ws / "a.txt").read_text() == "abc\n" and (ws / "bin.dat").read_bytes() == b"\x00\x01abc\x02"


async def test_patching_outside_asks(registry: ToolRegistry, ctx: ToolContext, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "conf.ini"
    outside.write_text("debug = false\n")
    os.symlink(outside, ws / "conf.ini")
    ok, text = await call(registry, ctx, "patch", path="conf.ini", old_string="false", new_string="true")
    assert not ok and "nobody can be asked" in text and outside.read_text() == "debug = false\n"
    approver = ScriptedApprover(True)
    ok, _ = await call(registry, with_approver(ctx, approver), "patch", path="conf.ini", old_string="false",
                       new_string="true")
    assert ok and outside.read_text() == "debug = true\n" and (ws / "conf.ini").is_symlink()
    assert [(a.tool, a.action, a.pattern) for a in approver.asked] == [
        ("patch", f"patch {outside}", f"patch:{outside}")]


async def test_a_long_diff_is_shortened(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "many.txt").write_text("x\n" * 500)
    ok, text = await call(registry, ctx, "patch", path="many.txt", old_string="x", new_string="y",
                          replace_all=True)
    diff = json.loads(text)["diff"]
    assert ok and "more diff lines not shown" in diff and len(diff.splitlines()) <= 82


async def test_a_patch_that_cannot_apply_asks_nobody(registry: ToolRegistry, ctx: ToolContext,
                                                     tmp_path: Path) -> None:
    outside = tmp_path / "conf.ini"
    outside.write_text("debug = false\n")
    approver = ScriptedApprover(True)
    ok, text = await call(registry, with_approver(ctx, approver), "patch", path=str(outside),
                          old_string="verbose", new_string="quiet")
    assert not ok and "was not found" in text and approver.asked == []
    ok, text = await call(registry, with_approver(ctx, approver), "patch", path=str(tmp_path / "none.ini"),
                          old_string="a", new_string="b")
    assert not ok and "There is no file" in text and approver.asked == []


async def test_a_huge_file_is_patched_without_a_diff(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "big.csv").write_text("".join(f"{n},row\n" for n in range(60_000)))
    ok, text = await call(registry, ctx, "patch", path="big.csv", old_string="\n59999,row", new_string="\n59999,ROW")
    assert ok and "no diff for a file of more than 50,000 lines" in json.loads(text)["diff"]
    assert (ws / "big.csv").read_text().endswith("59999,ROW\n")
