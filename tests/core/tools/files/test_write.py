"""write_file: atomic writes in the workspace, and writes elsewhere only after a person's yes."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from core.tools import ApprovalDecision, ApprovalRequest, ToolContext, ToolRegistry

from ._env import ScriptedApprover, call, with_approver


async def test_writes_create_folders_and_report_bytes(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    ok, text = await call(registry, ctx, "write_file", path="a/b/c.txt", content="héllo\n")
    assert ok and json.loads(text) == {"success": True, "path": "a/b/c.txt", "bytes_written": 7, "created": True}
    assert (ws / "a" / "b" / "c.txt").read_text() == "héllo\n"
    ok, text = await call(registry, ctx, "write_file", path="a/b/c.txt", content="")
    assert ok and json.loads(text)["created"] is False and (ws / "a" / "b" / "c.txt").read_bytes() == b""
    assert [p.name for p in (ws / "a" / "b").iterdir()] == ["c.txt"]  # no temporary file left


async def test_an_existing_file_keeps_its_mode_and_a_new_one_follows_the_umask(
        registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    assert (await call(registry, ctx, "write_file", path="run.sh", content="#!/bin/sh\necho hi\n"))[0]
    assert stat.S_IMODE(script.stat().st_mode) == 0o750 and "echo hi" in script.read_text()
    old = os.umask(0o027)
    try:
        assert (await call(registry, ctx, "write_file", path="new.txt", content="x"))[0]
    finally:
        os.umask(old)
    assert stat.S_IMODE((ws / "new.txt").stat().st_mode) == 0o640


async def test_writing_through_a_symlink_inside_writes_its_target(registry: ToolRegistry, ctx: ToolContext,
                                                                  ws: Path) -> None:
    (ws / "real.txt").write_text("old")
    os.symlink(ws / "real.txt", ws / "alias.txt")
    ok, text = await call(registry, ctx, "write_file", path="alias.txt", content="new")
    assert ok and json.loads(text)["path"] == "real.txt"
    assert (ws / "real.txt").read_text() == "new" and (ws / "alias.txt").is_symlink()


async def test_outside_the_roots_with_nobody_to_ask_is_refused(registry: ToolRegistry, ctx: ToolContext,
                                                               ws: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "x.txt"
    os.symlink(tmp_path / "out.txt", ws / "leak.txt")
    for path in (str(target), "leak.txt"):
        ok, text = await call(registry, ctx, "write_file", path=path, content="x")
        assert not ok and "needs a person's approval" in text and "nobody can be asked" in text
    assert not target.exists() and not target.parent.exists() and not (tmp_path / "out.txt").exists()


async def test_outside_the_roots_asks_and_writes_when_approved(registry: ToolRegistry, ctx: ToolContext,
                                                               tmp_path: Path) -> None:
    approver = ScriptedApprover(True)
    target = tmp_path / "elsewhere" / "x.txt"
    ok, text = await call(registry, with_approver(ctx, approver), "write_file", path=str(target), content="yes")
    assert ok and json.loads(text)["path"] == str(target) and target.read_text() == "yes"
    [asked] = approver.asked
    assert (asked.tool, asked.action, asked.reason, asked.pattern) == (
        "write_file", f"write {target}", "a write outside the allowed folders", f"write_file:{target}")


async def test_outside_the_roots_denied_is_not_written(registry: ToolRegistry, ctx: ToolContext,
                                                       tmp_path: Path, ws: Path) -> None:
    approver = ScriptedApprover(False)
    (tmp_path / "out.txt").write_text("original")
    os.symlink(tmp_path / "out.txt", ws / "leak.txt")
    ok, text = await call(registry, with_approver(ctx, approver), "write_file", path="leak.txt", content="evil")
    assert not ok and "did not approve" in text and "denied by 42" in text
    assert (tmp_path / "out.txt").read_text() == "original" and (ws / "leak.txt").is_symlink()
    [asked] = approver.asked
    # the person is shown where the write really goes, and that a symlink led there
    assert asked.action == f"write {tmp_path / 'out.txt'}" and "symlink" in asked.reason


async def test_hermes_home_and_ssh_are_asked_about(registry: ToolRegistry, ctx: ToolContext, home: Path,
                                                   ssh: Path) -> None:
    approver = ScriptedApprover(False)
    asking = with_approver(ctx, approver)
    for path in (str(home / ".env"), str(home / "config.yaml"), str(ssh / "authorized_keys")):
        ok, text = await call(registry, asking, "write_file", path=path, content="x")
        assert not ok and "did not approve" in text
    assert not (home / ".env").exists() and not (home / "config.yaml").exists() and not (ssh / "authorized_keys").exists()
    assert [a.action for a in approver.asked] == [f"write {home / '.env'}", f"write {home / 'config.yaml'}",
                                                  f"write {ssh / 'authorized_keys'}"]
    # the workspace under $HERMES_HOME is the agent's own: not asked
    assert (await call(registry, asking, "write_file", path="fine.txt", content="x"))[0]
    assert len(approver.asked) == 3


async def test_a_root_that_holds_ssh_still_asks(home: Path, ssh: Path, ctx: ToolContext) -> None:
    from core.tools.files import FilesSettings, file_tools

    os.makedirs(ssh)
    userhome = ssh.parent
    registry = ToolRegistry(file_tools(FilesSettings.for_home(home, [str(userhome)], protected_extra=(ssh,))))
    approver = ScriptedApprover(True)
    assert (await call(registry, with_approver(ctx, approver), "write_file", path="notes.txt", content="x"))[0]
    assert approver.asked == []
    ok, _ = await call(registry, with_approver(ctx, approver), "write_file", path=".ssh/authorized_keys",
                       content="ssh-ed25519 AAAA")
    assert ok and [a.pattern for a in approver.asked] == [f"write_file:{ssh / 'authorized_keys'}"]
    assert "secrets" in approver.asked[0].reason


@pytest.mark.parametrize("path", ["../../etc/cron.d/x", "../outside.txt", "~/.bashrc", "/proc/self/oom_score_adj",
                                  "/dev/null"])
async def test_never_written_even_with_a_yes(registry: ToolRegistry, ctx: ToolContext, path: str) -> None:
    approver = ScriptedApprover(True)
    ok, text = await call(registry, with_approver(ctx, approver), "write_file", path=path, content="x")
    assert not ok and text.startswith("Error:") and approver.asked == []


async def test_folders_and_fifos_are_not_written(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "dir").mkdir()
    os.mkfifo(ws / "pipe")
    ok, text = await call(registry, ctx, "write_file", path="dir", content="x")
    assert not ok and "is a folder" in text
    ok, text = await call(registry, ctx, "write_file", path="pipe", content="x")
    assert not ok and "FIFO" in text
    assert stat.S_ISFIFO(os.lstat(ws / "pipe").st_mode)


async def test_too_much_content_is_refused(home: Path, ctx: ToolContext, ws: Path) -> None:
    from core.tools.files import FilesSettings, file_tools

    registry = ToolRegistry(file_tools(FilesSettings.for_home(home, max_write_bytes=10)))
    ok, text = await call(registry, ctx, "write_file", path="x.txt", content="é" * 6)
    assert not ok and "at most" in text and not (ws / "x.txt").exists()


async def test_unicode_names_are_written(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    ok, _ = await call(registry, ctx, "write_file", path="données/ñandú 🐦.txt", content="ok")
    assert ok and (ws / "données" / "ñandú 🐦.txt").read_text() == "ok"


class SwappingApprover(ScriptedApprover):
    """Says yes, but while the person 'decides' someone swaps the target's folder for a symlink."""

    def __init__(self, folder: Path, elsewhere: Path) -> None:
        super().__init__(True)
        self.folder, self.elsewhere = folder, elsewhere

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        os.rename(self.folder, self.folder.with_name("moved"))
        os.symlink(self.elsewhere, self.folder)
        return await super().decide(request)


async def test_a_folder_swapped_for_a_symlink_while_asking_is_not_written_through(
        registry: ToolRegistry, ctx: ToolContext, home: Path, tmp_path: Path) -> None:
    os.makedirs(home / "cfg")
    os.makedirs(tmp_path / "evil")
    approver = SwappingApprover(home / "cfg", tmp_path / "evil")
    ok, text = await call(registry, with_approver(ctx, approver), "write_file", path=str(home / "cfg" / "x.yaml"),
                          content="x")
    assert not ok and "changed while it was being written" in text and len(approver.asked) == 1
    assert os.listdir(tmp_path / "evil") == [] and os.listdir(home / "moved") == []


async def test_a_file_replaced_while_asking_is_not_overwritten(registry: ToolRegistry, ctx: ToolContext,
                                                               tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("v1")

    class Replacing(ScriptedApprover):
        async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
            os.replace(tmp_path / "v2.txt", target)  # another writer's atomic replace
            return await super().decide(request)

    (tmp_path / "v2.txt").write_text("v2")
    ok, text = await call(registry, with_approver(ctx, Replacing(True)), "write_file", path=str(target),
                          content="mine")
    assert not ok and "changed" in text and target.read_text() == "v2"
