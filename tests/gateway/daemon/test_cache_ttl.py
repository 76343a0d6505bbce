"""``model.cache_ttl`` from config.yaml to the model request, through a running gateway."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import run_gateway


@pytest.mark.parametrize(("ttl", "marker"), [
    ("1h", {"type": "ephemeral", "ttl": "1h"}),
    (None, {"type": "ephemeral"}),  # 5m, the default: the markers as they always were
])
async def test_the_configured_cache_ttl_is_on_the_request(gateway_home: Path, fake_openai: FakeOpenAI,
                                                          ttl: str | None, marker: dict[str, str]) -> None:
    model = {"default": "anthropic/claude-sonnet-4", **({"cache_ttl": ttl} if ttl else {})}
    fake_openai.reply("cached")
    async with run_gateway(gateway_home, fake_openai.base_url, config={"model": model}) as gw:
        response = await gw.ask("hello", model="anthropic/claude-sonnet-4")
        assert response.status_code == 200, response.text
    body = fake_openai.chat_requests[-1].body
    markers = [m["content"][-1]["cache_control"] for m in body["messages"] if isinstance(m["content"], list)]
    assert markers and all(m == marker for m in markers), json.dumps(body)[:500]
