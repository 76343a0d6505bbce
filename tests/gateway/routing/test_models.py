"""Which model a turn uses: session > platforms.<name>.channel_models > the global default an owner
set > model.default, read from a real state.db; and the config checks of models.allowed."""

from __future__ import annotations

import re
import time

import pytest
from pydantic import ValidationError

from adapters.base import ChatType, InboundMessage
from gateway.config import Settings
from gateway.routing.models import GLOBAL_MODEL, SESSION_MODEL, ModelPickers, effective_model, turn_model
from storage import StateStore, ops, settings

ALLOWED = ["small", {"name": "big", "prices": {"prompt": 1, "completion": 2}}, "huge"]


def _settings(**platforms: object) -> Settings:
    return Settings.model_validate({"model": {"default": "small"}, "models": {"allowed": ALLOWED},
                                    "platforms": platforms})


def _msg(chat: str = "C1", user: str = "U1") -> InboundMessage:
    return InboundMessage(platform="slack", chat_id=chat, chat_type=ChatType.CHANNEL, user_id=user, text="hi")


async def test_precedence_session_then_channel_then_global_then_default(store: StateStore) -> None:
    config = _settings(slack={"channel_models": {"C1": "huge"}})
    await store.write(lambda c: ops.create_session(c, "s1", "slack"))
    assert await effective_model(store, config, _msg("C2"), "s1") == ("small", "default")
    await store.write(lambda c: settings.set_global(c, GLOBAL_MODEL, "big", updated_by="t", now=time.time()))
    assert await effective_model(store, config, _msg("C2"), "s1") == ("big", "global")
    assert await effective_model(store, config, _msg("C1"), "s1") == ("huge", "channel")
    await store.write(lambda c: settings.set_session(c, "s1", SESSION_MODEL, "small", now=time.time()))
    assert await effective_model(store, config, _msg("C1"), "s1") == ("small", "session")
    choice = await turn_model(store, config, _msg("C1"), "s1")
    assert choice is not None and choice.name == "small" and choice.prices is None
    assert choice.fallback is not None and choice.fallback.name == "huge"
    # A setting naming a model the config no longer allows is skipped.
    await store.write(lambda c: settings.set_session(c, "s1", SESSION_MODEL, "retired", now=time.time()))
    assert await effective_model(store, config, _msg("C1"), "s1") == ("huge", "channel")
    big = await turn_model(store, config, _msg("C2"), "s1")
    assert big is not None and big.prices is not None and big.prices.completion == 2


def test_channel_models_must_be_allowed_and_take_numeric_ids() -> None:
    with pytest.raises(ValidationError, match=re.escape("platforms.telegram.channel_models.-100: 'bgi' is not in models.allowed")):
        _settings(telegram={"channel_models": {-100: "bgi"}})
    assert _settings(telegram={"channel_models": {-100: "big"}}).platforms.telegram.channel_models == {"-100": "big"}
    with pytest.raises(ValidationError, match="listed twice: big"):
        Settings.model_validate({"models": {"allowed": ["big", {"name": "big"}]}})


def test_a_newer_menu_makes_the_older_one_stale() -> None:
    pickers = ModelPickers()
    first = pickers.open(_msg(), ["small", "big"])
    other = pickers.open(_msg(user="U2"), ["small"])
    second = pickers.open(_msg(), ["small", "big"])
    assert pickers.get(first.id) is None and pickers.get(second.id) is second and pickers.get(other.id) is other
