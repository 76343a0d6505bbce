"""/retry, /undo, /btw and /bg on Slack, as slash commands of the app in a DM: the real daemon and
slack-bolt against ``FakeSlack``, the scripted ``FakeOpenAI`` (its recorded requests show what the
model is given)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.emulators.fake_slack import FakeSlack
from tests.fakes.openai_server import FakeOpenAI

from .test_adapter import WAIT, run_slack_gateway
from .test_commands import DM, QUIET_AGENT, posted, said, shown, slash


def seen(fake_openai: FakeOpenAI) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in fake_openai.chat_requests[-1].body["messages"]
            if m["role"] != "system"]


async def test_conversation_controls_as_slash_commands(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=QUIET_AGENT):
        fake_openai.reply("wrong")
        assert await said(fake, "name a river") == "wrong"
        fake_openai.reply("the Nile")
        assert await slash(fake, "/retry") == "the Nile"
        assert seen(fake_openai) == [("user", "name a river")]
        fake_openai.reply("a river")
        assert await slash(fake, "/btw what did I ask for?") == "💬 (by the way) a river"
        assert await slash(fake, "/undo") == "↩️ Removed the last exchange (3 messages in all)."
        assert await slash(fake, "/retry") == "Nothing to retry: this conversation has no message of yours yet."
        found = re.search(r"Background task ([0-9a-f]{6}) started", await slash(fake, "/bg list three seas"))
        assert found
        done = f"🔙 Background task {found.group(1)} is done:\n\necho: list three seas"
        await fake.wait_for(lambda: any(shown(m["text"]) == done for m in posted(fake, DM, None)), WAIT,
                            what="the background answer")
