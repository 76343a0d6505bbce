"""search_files: globs, regexes, what is skipped, the caps, and a regex that would never end."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from core.tools import ToolContext, ToolRegistry
from core.tools.files import FilesSettings, file_tools

from ._env import call


@pytest.fixture
def tree(ws: Path) -> Path:
    for rel, text in {
        "README.md": "# Project\nTODO: write docs\n",
        "src/app.py": "import os\n# TODO: tidy\nprint('x')\n",
        "src/lib/util.py": "def todo():\n    return 'todo'\n",
        "src/lib/notes.txt": "nothing here\n",
        "docs/guide.md": "Guide\n",
        ".git/config": "TODO in git\n",
        "ünï/çödé.py": "# TODO: unicode\n",
    }.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    (ws / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00TODO\x00")
    return ws


async def test_glob(registry: ToolRegistry, ctx: ToolContext, tree: Path) -> None:
    ok, text = await call(registry, ctx, "search_files", pattern="**/*.py")
    assert ok and text.splitlines()[1:] == ["src/app.py", "src/lib/util.py", "ünï/çödé.py"]
    assert text.startswith("3 files:")
    ok, text = await call(registry, ctx, "search_files", pattern="*.md")  # no '/': names anywhere
    assert text.splitlines()[1:] == ["README.md", "docs/guide.md"]
    ok, text = await call(registry, ctx, "search_files", pattern="src/*.py")
    assert text.splitlines()[1:] == ["src/app.py"]
    ok, text = await call(registry, ctx, "search_files", pattern="*.py", path="src/lib")
    assert text.splitlines()[1:] == ["src/lib/util.py"]  # shown from the workspace, ready for read_file
    ok, text = await call(registry, ctx, "search_files", pattern="[!a-t]*.py")
    assert text.splitlines()[1:] == ["src/lib/util.py", "ünï/çödé.py"]


async def test_regex_skips_git_and_binary(registry: ToolRegistry, ctx: ToolContext, tree: Path) -> None:
    ok, text = await call(registry, ctx, "search_files", regex="TODO")
    lines = text.splitlines()
    assert ok and lines[0].startswith("3 matching lines in 3 files")
    assert lines[1:4] == ["README.md:2: TODO: write docs", "src/app.py:2: # TODO: tidy", "ünï/çödé.py:1: # TODO: unicode"]
    assert "Skipped 1 binary file." in text and ".git" not in "\n".join(lines[1:4])
    ok, text = await call(registry, ctx, "search_files", regex="todo", ignore_case=True, pattern="**/*.py")
    assert [ln.split(":")[0] for ln in text.splitlines()[1:]] == ["src/app.py", "src/lib/util.py", "src/lib/util.py",
                                                                  "ünï/çödé.py"]


async def test_nothing_found_and_bad_input(registry: ToolRegistry, ctx: ToolContext, tree: Path) -> None:
    ok, text = await call(registry, ctx, "search_files", regex="no such words")
    assert ok and "Nothing matched" in text
    for args, expected in [({}, "Give 'pattern'"), ({"regex": "(unclosed"}, "not a valid regular expression"),
                           ({"pattern": "/etc/*"}, "relative to 'path'"), ({"regex": "x", "path": "/etc"}, "outside"),
                           ({"regex": "x", "path": "../.."}, "'..'"), ({"regex": "x", "path": "nope"}, "no file")]:
        ok, text = await call(registry, ctx, "search_files", **args)
        assert not ok and expected in text, (args, text)


async def test_symlinks_and_fifos_are_not_followed_or_opened(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                                             tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("PASSWORD=hunter2\n")
    os.symlink(secret, ws / "secret-link.txt")
    os.symlink(tmp_path, ws / "outside-dir")
    os.symlink("/etc", ws / "etc")
    os.symlink(ws / "loop", ws / "loop")
    os.mkfifo(ws / "pipe.txt")
    (ws / "mine.txt").write_text("PASSWORD=mine\n")
    ok, text = await call(registry, ctx, "search_files", regex="PASSWORD|root")
    assert ok and text.splitlines()[1:] == ["mine.txt:1: PASSWORD=mine"] and "hunter2" not in text
    ok, text = await call(registry, ctx, "search_files", pattern="*")
    assert ok and text.splitlines()[1:] == ["mine.txt"]


async def test_caps_say_they_cut(home: Path, ws: Path, ctx: ToolContext) -> None:
    registry = ToolRegistry(file_tools(FilesSettings.for_home(
        home, max_search_files=5, max_search_matches=7, max_search_file_bytes=1000, max_search_entries=50)))
    for n in range(20):
        (ws / f"f{n:02d}.txt").write_text("hit\nhit\n")
    (ws / "big.txt").write_text("hit\n" * 1000)
    ok, text = await call(registry, ctx, "search_files", pattern="*.txt")
    assert ok and len(text.splitlines()) == 1 + 5 + 1 and "Stopped at 5 files" in text
    ok, text = await call(registry, ctx, "search_files", regex="hit")
    assert ok and text.splitlines()[0].startswith("7 matching lines in 4 files")
    assert len([ln for ln in text.splitlines() if ln.endswith(": hit")]) == 7
    assert "Stopped at 7 matching lines" in text
    ok, text = await call(registry, ctx, "search_files", regex="hit", pattern="big.txt")
    assert ok and "Skipped 1 file over 1000 bytes" in text
    for n in range(60):
        (ws / f"g{n:02d}.log").write_text("")
    ok, text = await call(registry, ctx, "search_files", pattern="*.nothing")
    assert ok and "Stopped after looking at 50 entries" in text


async def test_a_catastrophic_regex_ends_in_time_and_the_loop_keeps_running(
        home: Path, ws: Path, ctx: ToolContext) -> None:
    import asyncio

    registry = ToolRegistry(file_tools(FilesSettings.for_home(home, search_timeout=1.0)))
    (ws / "evil.txt").write_text("a" * 5000 + "b\n")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    ok, text = await call(registry, ctx, "search_files", regex="(a+)+$")
    elapsed = time.monotonic() - started
    ticker.cancel()
    assert ok and "Stopped after 1 s" in text and "backtracks" in text
    assert elapsed < 5
    assert ticks > 10  # the event loop (and the GIL) stayed free while the regex ran (held: ~0)


async def test_very_long_lines_are_searched_in_pieces(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "min.js").write_text("x" * 1_000_000 + "NEEDLE" + "y" * 1_000_000 + "\nsecond line NEEDLE\n")
    ok, text = await call(registry, ctx, "search_files", regex="NEEDLE")
    lines = text.splitlines()
    assert ok and lines[1].startswith("min.js:1: ") and len(lines[1]) < 300 and lines[2] == "min.js:2: second line NEEDLE"


async def test_a_wide_root_does_not_open_ssh_or_hermes_home_to_a_search(home: Path, ws: Path, ssh: Path,
                                                                        tmp_path: Path, ctx: ToolContext) -> None:
    os.makedirs(ssh)
    (ssh / "id_ed25519").write_text("KEY-SECRET\n")
    (home / ".env").write_text("TOKEN=KEY-SECRET\n")
    (ws / "notes.txt").write_text("KEY-SECRET is not here\n")
    registry = ToolRegistry(file_tools(FilesSettings(roots=(tmp_path, ws), home=home, protected_extra=(ssh,))))
    ok, text = await call(registry, ctx, "search_files", regex="KEY-SECRET")
    assert ok and text.startswith("1 matching line in 1 file")
    assert text.splitlines()[1] == "hermes/workspace/notes.txt:1: KEY-SECRET is not here"
    ok, text = await call(registry, ctx, "search_files", pattern="**/*")
    assert ok and "hermes/workspace/notes.txt" in text and ".env" not in text and "id_ed25519" not in text
    ok, text = await call(registry, ctx, "search_files", regex="KEY", path=str(ssh))
    assert not ok and "secrets" in text


async def test_names_that_are_not_utf8_are_shown_safely(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    with open(os.path.join(os.fsencode(ws), b"caf\xe9.txt"), "w") as f:
        f.write("needle\n")
    ok, text = await call(registry, ctx, "search_files", regex="needle")
    assert ok and text.splitlines()[1] == "caf\ufffd.txt:1: needle"
    text.encode("utf-8")  # no lone surrogate reaches the model request


async def test_globstar_in_the_middle(registry: ToolRegistry, ctx: ToolContext, tree: Path) -> None:
    ok, text = await call(registry, ctx, "search_files", pattern="src/**/*.py")
    assert ok and text.splitlines()[1:] == ["src/app.py", "src/lib/util.py"]
    ok, text = await call(registry, ctx, "search_files", pattern="src/**")
    assert ok and text.splitlines()[1:] == ["src/app.py", "src/lib/notes.txt", "src/lib/util.py"]
    ok, text = await call(registry, ctx, "search_files", pattern="s?c/lib/[nu]*.*")
    assert ok and text.splitlines()[1:] == ["src/lib/notes.txt", "src/lib/util.py"]


async def test_exactly_the_cap_is_not_called_cut(home: Path, ws: Path, ctx: ToolContext) -> None:
    registry = ToolRegistry(file_tools(FilesSettings.for_home(home, max_search_files=3, max_search_matches=3)))
    for n in range(3):
        (ws / f"f{n}.txt").write_text("hit\n")
    ok, text = await call(registry, ctx, "search_files", pattern="*.txt")
    assert ok and "Stopped" not in text and len(text.splitlines()) == 4
    ok, text = await call(registry, ctx, "search_files", regex="hit")
    assert ok and "Stopped" not in text and len(text.splitlines()) == 4


async def test_many_empty_folders_count_against_the_entry_cap(home: Path, ws: Path, ctx: ToolContext) -> None:
    registry = ToolRegistry(file_tools(FilesSettings.for_home(home, max_search_entries=20)))
    for n in range(40):
        os.makedirs(ws / f"d{n:02d}" / "inner")
    ok, text = await call(registry, ctx, "search_files", pattern="*.py")
    assert ok and "Stopped after looking at 20 entries" in text
