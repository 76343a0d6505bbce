"""Which model a turn runs on, and the model pickers waiting for a press.

Precedence, first that is set: the session's own (``/model``, a setting of the session id, so
``/new`` starts without it) > ``platforms.<name>.channel_models`` (the chat's id) > the global
default an owner set (``/model --global``) > ``model.default``. A model that is no longer in
``models.allowed`` (the config changed since it was chosen) is skipped.

A switch remembers the model it replaced: when the server then rejects the new one as unknown,
the turn goes on with the replaced one (``core.ModelChoice.fallback``) and the setting goes back.

A picker (``/model`` without a name, on a platform with buttons or menus) lives in memory: a press
from another person, or for a picker that is gone (answered, replaced, older than a day, from
before a restart) is refused with a reply, never acted on.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

import structlog

from adapters.base import InboundMessage
from core.model_choice import ModelChoice, ModelPrices
from gateway.config import AllowedModel, Settings
from storage import Store, ops, settings

__all__ = [
    "GLOBAL_MODEL",
    "SESSION_MODEL",
    "ModelPicker",
    "ModelPickers",
    "ModelSource",
    "allowed_models",
    "effective_model",
    "revert_rejected",
    "turn_model",
]

log = structlog.get_logger("hermes.models")

#: the session setting /model sets, and the one that remembers what it replaced ("" for nothing)
SESSION_MODEL, SESSION_PREVIOUS = "model", "model.previous"
#: the global setting /model --global sets, and what it replaced
GLOBAL_MODEL, GLOBAL_PREVIOUS = "model.default", "model.default.previous"

ModelSource = Literal["session", "channel", "global", "default"]

_PICKER_TTL = 24 * 3600.0
_MAX_PICKERS = 1000


def allowed_models(config: Settings) -> list[AllowedModel]:
    """What /model offers: ``models.allowed``, or ``model.default`` alone when that list is empty."""
    if config.models.allowed:
        return list(config.models.allowed)
    return [AllowedModel(name=config.model.default)] if config.model.default else []


def _allowed(config: Settings, name: str | None) -> str | None:
    if not name:
        return None
    return name if any(m.name == name for m in allowed_models(config)) else None


def _channel_model(config: Settings, msg: InboundMessage) -> str | None:
    platform = getattr(config.platforms, msg.platform, None)
    channels: dict[str, str] = getattr(platform, "channel_models", None) or {}
    return channels.get(msg.chat_id)


async def effective_model(store: Store, config: Settings, msg: InboundMessage,
                          session_id: str | None) -> tuple[str | None, ModelSource]:
    """The model this chat's next turn uses, and where that choice comes from."""
    if not config.models.allowed:
        # Nothing to switch to (a channel's model is checked against the list at load): a turn's
        # path reads nothing.
        return config.model.default, "default"
    own, chosen = await store.read(lambda c: (
        settings.get_session(c, session_id, SESSION_MODEL) if session_id else None,
        settings.get_global(c, GLOBAL_MODEL)))
    if _allowed(config, own):
        return own, "session"
    return _choose_below_session(config, msg, chosen)


async def _below_session(store: Store, config: Settings,
                         msg: InboundMessage) -> tuple[str | None, ModelSource]:
    if _channel_model(config, msg):
        return _choose_below_session(config, msg, None)
    return _choose_below_session(config, msg, await store.read(lambda c: settings.get_global(c, GLOBAL_MODEL)))


def _choose_below_session(config: Settings, msg: InboundMessage,
                          global_model: str | None) -> tuple[str | None, ModelSource]:
    channel = _channel_model(config, msg)
    if channel:  # config.yaml said so for this channel (checked against models.allowed at load)
        return channel, "channel"
    chosen = _allowed(config, global_model)
    if chosen:
        return chosen, "global"
    return config.model.default, "default"


def _prices(config: Settings, name: str) -> ModelPrices | None:
    entry = config.models.find(name)
    if entry is None or entry.prices is None:
        return None
    return ModelPrices(entry.prices.prompt, entry.prices.completion, entry.prices.cached)


async def turn_model(store: Store, config: Settings, msg: InboundMessage, session_id: str) -> ModelChoice | None:
    """The turn's model with its prices, and the one to fall back to; None: ``model.default`` unpriced
    and nothing to fall back from (the client's own default)."""
    name, source = await effective_model(store, config, msg, session_id)
    if name is None:
        return None
    fallback: str | None = None
    if source == "session":
        previous = await store.read(lambda c: settings.get_session(c, session_id, SESSION_PREVIOUS))
        fallback = _allowed(config, previous) or (await _below_session(store, config, msg))[0]
    elif source == "global":
        previous = await store.read(lambda c: settings.get_global(c, GLOBAL_PREVIOUS))
        fallback = _allowed(config, previous) or config.model.default
    elif source == "channel":
        fallback = config.model.default
    back = ModelChoice(fallback, _prices(config, fallback)) if fallback and fallback != name else None
    return ModelChoice(name, _prices(config, name), back)


async def revert_rejected(store: Store, config: Settings, msg: InboundMessage, session_id: str,
                          rejected: str, note: str | None = None) -> str:
    """The server rejected ``rejected``: the setting that chose it goes back to what it replaced.
    Returns the note for the person (which model the chat is on now), after ``note`` if one was due."""
    _, source = await effective_model(store, config, msg, session_id)
    now = time.time()
    if source == "session":
        below, _ = await _below_session(store, config, msg)

        def back(conn: sqlite3.Connection) -> None:
            previous = settings.get_session(conn, session_id, SESSION_PREVIOUS)
            settings.set_session(conn, session_id, SESSION_MODEL, previous or None, now=now)
            settings.set_session(conn, session_id, SESSION_PREVIOUS, None, now=now)
            ops.update_session_model(conn, session_id, previous or below)
        await store.write(back)
    elif source == "global":
        def back_global(conn: sqlite3.Connection) -> None:
            previous = settings.get_global(conn, GLOBAL_PREVIOUS)
            settings.set_global(conn, GLOBAL_MODEL, previous or None, updated_by="rejected", now=now)
            settings.set_global(conn, GLOBAL_PREVIOUS, None, updated_by="rejected", now=now)
        await store.write(back_global)
    now_on, _ = await effective_model(store, config, msg, session_id)
    log.warning("models.rejected_reverted", model=rejected, source=source, now_on=now_on)
    where = "" if source in ("session", "global") else " (it is set in config.yaml: fix it there)"
    said = (f"The model server does not serve '{rejected}'{where}, so this answer comes from "
            f"'{now_on}', and this chat is back on it.")
    return f"{note}\n⚠️ {said}" if note else said


@dataclass
class ModelPicker:
    """A model menu shown to one person in one chat."""

    id: str
    platform: str
    chat_id: str
    thread_id: str | None
    user_id: str | None
    user_name: str | None
    names: tuple[str, ...]
    created: float
    message_id: str | None = None


class ModelPickers:
    """The pickers waiting for a press, by id (at most the newest ``_MAX_PICKERS``, each for a day)."""

    def __init__(self) -> None:
        self._open: OrderedDict[str, ModelPicker] = OrderedDict()

    def open(self, msg: InboundMessage, names: list[str]) -> ModelPicker:
        self._sweep()
        # One open menu per person and chat: an older one is stale once a newer one is shown.
        for old in [p for p in self._open.values() if (p.platform, p.chat_id, p.user_id)
                    == (msg.platform, msg.chat_id, msg.user_id)]:
            del self._open[old.id]
        picker = ModelPicker(secrets.token_hex(4), msg.platform, msg.chat_id, msg.thread_id, msg.user_id,
                             msg.user_name, tuple(names), time.time())
        self._open[picker.id] = picker
        while len(self._open) > _MAX_PICKERS:
            self._open.popitem(last=False)
        return picker

    def get(self, picker_id: str) -> ModelPicker | None:
        self._sweep()
        return self._open.get(picker_id)

    def close(self, picker_id: str) -> None:
        self._open.pop(picker_id, None)

    def _sweep(self) -> None:
        cutoff = time.time() - _PICKER_TTL
        for stale in [p.id for p in self._open.values() if p.created < cutoff]:
            del self._open[stale]
