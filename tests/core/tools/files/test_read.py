"""read_file against real files: ranges, caps, huge and binary files, and hostile paths."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from core.tools import ToolContext, ToolRegistry
from core.tools.files import FilesSettings, file_tools

from ._env import call


async def test_numbered_lines_and_a_range(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    ok, text = await call(registry, ctx, "read_file", path="notes.txt")
    assert ok and text.startswith("     1\tline 1\n     2\tline 2\n")
    assert text.endswith("[end of notes.txt: 10 lines]")
    ok, text = await call(registry, ctx, "read_file", path="notes.txt", offset=4, limit=3)
    assert ok and text.splitlines()[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "read on with offset=7" in text
    ok, text = await call(registry, ctx, "read_file", path="notes.txt", offset=8, limit=3)
    assert ok and text.endswith("[end of notes.txt: 10 lines]") and "offset=" not in text
    ok, text = await call(registry, ctx, "read_file", path="notes.txt", offset=50)
    assert ok and "has 10 lines; offset 50 is past its end" in text


async def test_crlf_and_a_last_line_without_newline(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree")
    ok, text = await call(registry, ctx, "read_file", path="dos.txt")
    assert ok and text.splitlines()[:3] == ["     1\tone", "     2\ttwo", "     3\tthree"]


async def test_empty_file(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "empty").touch()
    assert await call(registry, ctx, "read_file", path="empty") == (True, "empty is empty (0 bytes).")


async def test_the_answer_stops_at_max_read_bytes_and_says_how_to_go_on(home: Path, ws: Path,
                                                                        ctx: ToolContext) -> None:
    registry = ToolRegistry(file_tools(FilesSettings.for_home(home, max_read_kb=1)))
    (ws / "big.txt").write_text("".join(f"{n:04d} " + "x" * 90 + "\n" for n in range(1, 101)))
    ok, text = await call(registry, ctx, "read_file", path="big.txt")
    body, note = text.rsplit("\n", 1)
    assert ok and len(body) <= 1024
    shown = len(body.splitlines())
    assert 5 <= shown < 20 and f"read on with offset={shown + 1}" in note and "1,024 bytes" in note


async def test_a_very_long_line_is_shown_cut(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                             settings: FilesSettings) -> None:
    (ws / "long.txt").write_text("short\n" + "é" * 3_000_000 + "\nafter\n")
    ok, text = await call(registry, ctx, "read_file", path="long.txt")
    lines = text.splitlines()
    assert ok and lines[0] == "     1\tshort" and lines[2] == "     3\tafter"
    assert lines[1].startswith("     2\téééé") and lines[1].endswith("[line cut at 2,000 characters]")
    assert len(lines[1]) < settings.max_line_chars + 100


async def test_a_2gb_sparse_file_is_read_by_range_without_reading_it_all(
        registry: ToolRegistry, ctx: ToolContext, home: Path, ws: Path) -> None:
    huge = ws / "huge.log"
    with huge.open("w") as f:
        f.writelines(f"event {n}\n" for n in range(1, 5001))
    os.truncate(huge, 2 * 2**30)  # the rest: a hole of NULs, one 2 GB line with no newline
    started = time.monotonic()
    ok, text = await call(registry, ctx, "read_file", path="huge.log", offset=4000, limit=3)
    assert ok and text.splitlines()[:3] == ["  4000\tevent 4000", "  4001\tevent 4001", "  4002\tevent 4002"]
    assert "offset=4003" in text
    # into the 2 GB line: stopped after max_scan_bytes (here 64 MB), with advice, not after 2 GB
    registry = ToolRegistry(file_tools(FilesSettings.for_home(home, max_scan_bytes=64 * 2**20)))
    ok, text = await call(registry, ctx, "read_file", path="huge.log", offset=5001)
    assert ok and "lines are very long" in text and "2.0 GB" in text and "offset=" not in text
    ok, text = await call(registry, ctx, "read_file", path="huge.log", offset=5002)
    assert ok and "Stopped after reading" in text and "before line 5,002" in text
    assert time.monotonic() - started < 10


async def test_a_sparse_file_that_is_all_nuls_is_described(registry: ToolRegistry, ctx: ToolContext,
                                                          ws: Path) -> None:
    hole = ws / "disk.img"
    hole.touch()
    os.truncate(hole, 2 * 2**30)
    ok, text = await call(registry, ctx, "read_file", path="disk.img", offset=1, limit=10)
    assert ok and "binary file" in text and "2.0 GB" in text


async def test_binary_files_are_described_not_dumped(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00\x01\x02\xff" * 100
    (ws / "pic.png").write_bytes(png)
    (ws / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    ok, text = await call(registry, ctx, "read_file", path="pic.png")
    assert ok and "binary file (image/png" in text and "\x89" not in text and "IHDR" not in text
    ok, text = await call(registry, ctx, "read_file", path="latin1.txt")
    assert ok and "binary file" in text


async def test_unicode_names(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "日本語 ñ.md").write_text("こんにちは\n")
    ok, text = await call(registry, ctx, "read_file", path="日本語 ñ.md")
    assert ok and "こんにちは" in text


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "../secret.txt", "~/.bashrc",
                                  "/proc/self/environ", "/dev/zero"])
async def test_paths_outside_are_refused(registry: ToolRegistry, ctx: ToolContext, home: Path, path: str) -> None:
    (home / "secret.txt").write_text("TOKEN=abc")
    ok, text = await call(registry, ctx, "read_file", path=path)
    assert not ok and text.startswith("Error:")
    assert "root:" not in text and "TOKEN" not in text


async def test_symlinks_that_lead_out_are_refused(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                                  tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN=abc")
    os.symlink("/etc", ws / "etc")
    os.symlink(secret, ws / "link.txt")
    os.symlink(ws / "loop", ws / "loop")
    os.symlink(ws / "inside.txt", ws / "fine.txt")
    (ws / "inside.txt").write_text("hello\n")
    for path in ("etc/passwd", "etc/hostname", "link.txt"):
        ok, text = await call(registry, ctx, "read_file", path=path)
        assert not ok and "outside the allowed folders" in text and "TOKEN" not in text
    ok, text = await call(registry, ctx, "read_file", path="loop")
    assert not ok and "symlink loop" in text
    assert await call(registry, ctx, "read_file", path="fine.txt") == (True, "     1\thello\n[end of inside.txt: 1 line]")


async def test_a_fifo_is_refused_without_being_opened(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    ok, text = await call(registry, ctx, "read_file", path="pipe")  # opening it would block forever
    assert not ok and "FIFO" in text


async def test_folders_and_missing_files(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "src").mkdir()
    ok, text = await call(registry, ctx, "read_file", path="src")
    assert not ok and "is a folder" in text and "search_files" in text
    ok, text = await call(registry, ctx, "read_file", path="nope.txt")
    assert not ok and "There is no file at 'nope.txt'" in text


async def test_bad_arguments(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "a.txt").write_text("a\n")
    for args in ({"path": "a.txt", "offset": 0}, {"path": "a.txt", "limit": -1}, {"path": ""}, {},
                 {"path": "a\x00b"}, {"path": "a.txt", "offset": "many"}):
        outcome = await registry.dispatch("read_file", args, ctx)
        assert not outcome.ok and outcome.content.startswith("Error:"), args
