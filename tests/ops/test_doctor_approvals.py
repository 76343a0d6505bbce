"""``hermes-gateway doctor`` on ``tools.approvals``: off is a loud warning (the agent acts unasked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_doctor_status import cli, lines_about


@pytest.mark.parametrize(("policy", "line"), [
    ("off", "[WARN] approvals: tools.approvals is OFF: the agent runs dangerous commands and writes outside its "
            "folders WITHOUT ASKING ANYONE, in every chat it serves"),
    ("deny", "[ok  ] approvals: dangerous actions are refused (tools.approvals: deny)"),
    ("ask", "[ok  ] approvals: dangerous actions wait for a yes in the chat (300 s, then no)"),
])
def test_doctor_says_what_the_approval_policy_means(tmp_path: Path, policy: str, line: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"tools:\n  approvals: {policy}\n")
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert lines_about(proc.stdout, "approvals") == [line]
    if policy == "off":
        assert "fix: set tools.approvals: ask (or deny)" in proc.stdout and proc.returncode == 0
