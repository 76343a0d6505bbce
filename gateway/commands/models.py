"""/model [name], /model --global name: which model this session (or everyone) talks to.

``/model`` shows the model in force, where that choice comes from, and the allowed ones; on a
platform with menus (``adapters.choices.ChoiceMenus``) it offers them as a menu too, whose press
comes back as ``/model --pick <menu> <index>`` from the presser. ``/model name`` switches this
session (a setting of its id: /new starts without it); ``/model --global name`` sets the default
for every chat, owners only. The order of precedence and the fallback on a model the server
rejects are ``gateway.routing.models``'.
"""

from __future__ import annotations

import sqlite3
import time

import structlog

from adapters.base import OutboundMessage
from adapters.choices import MAX_OPTIONS, ChoiceMenus, ChoicePrompt
from gateway.config import AllowedModel, Settings, closest
from gateway.routing.commands import Command, CommandContext, CommandRegistry
from gateway.routing.models import (
    GLOBAL_MODEL,
    GLOBAL_PREVIOUS,
    SESSION_MODEL,
    SESSION_PREVIOUS,
    ModelPicker,
    ModelSource,
    allowed_models,
    effective_model,
)
from storage import ops, settings

__all__ = ["register_model_commands"]

log = structlog.get_logger("hermes.commands")

USAGE = "Usage: /model [name] · /model --global name (owners)"
_FROM: dict[ModelSource, str] = {
    "session": "chosen for this session with /model",
    "channel": "this channel's, from platforms.<name>.channel_models in config.yaml",
    "global": "the gateway's default, set by an owner with /model --global",
    "default": "model.default in config.yaml",
}


def _describe(entry: AllowedModel) -> str:
    line = entry.name if entry.label is None else f"{entry.name} — {entry.label}"
    p = entry.prices
    if p is not None:
        cached = f", ${p.cached:g} cached" if p.cached is not None else ""
        line += f" (${p.prompt:g} prompt, ${p.completion:g} completion{cached} per 1M tokens)"
    return line


def _listing(config: Settings, current: str | None) -> str:
    lines = ["Allowed models:"]
    for entry in allowed_models(config):
        lines.append(f"{'▸' if entry.name == current else '•'} {_describe(entry)}")
    if not config.models.allowed:
        lines.append("(models.allowed in config.yaml is empty: model.default is the only one)")
    return "\n".join(lines)


def _shown(name: str) -> str:
    return name if len(name) <= 80 else name[:79] + "…"


def _resolve(config: Settings, wanted: str) -> AllowedModel | str:
    """The allowed model ``wanted`` names (by name, or by label case aside), or the reply refusing it."""
    allowed = allowed_models(config)
    for entry in allowed:
        if entry.name == wanted or (entry.label is not None and entry.label.lower() == wanted.lower()):
            return entry
    if not allowed:
        return "No model is configured: set model.default (and models.allowed) in config.yaml."
    if not config.models.allowed:
        return (f"⚠️ '{_shown(wanted)}' is not allowed: models.allowed in config.yaml is empty, so this gateway uses "
                f"model.default ({config.model.default}) only. List the models to switch between there.")
    names = [e.name for e in allowed] + [e.label for e in allowed if e.label]
    guess = closest(wanted[:200], names)
    meant = f" Did you mean '{guess}'?" if guess else ""
    return f"⚠️ Unknown model '{_shown(wanted)}'.{meant}\n{_listing(config, None)}"


async def _session_id(ctx: CommandContext) -> str:
    """This chat's session, started now if it has none (a switch belongs to a session id)."""
    current = await ctx.services.index.current(ctx.session_key)
    if current is not None:
        return current
    return (await ctx.services.index.resolve(ctx.session_key, ctx.message, model=ctx.services.model_name)).session_id


async def _switch(ctx: CommandContext, wanted: str) -> str:
    s, config = ctx.services, ctx.services.config.settings
    entry = _resolve(config, wanted)
    if isinstance(entry, str):
        return entry
    session_id = await _session_id(ctx)
    current, source = await effective_model(s.store, config, ctx.message, session_id)
    if current == entry.name:
        return f"This session already uses {entry.name} ({_FROM[source]})."
    now = time.time()

    def op(conn: sqlite3.Connection) -> None:
        own = settings.get_session(conn, session_id, SESSION_MODEL)
        settings.set_session(conn, session_id, SESSION_PREVIOUS, own or "", now=now)  # "": nothing of its own
        settings.set_session(conn, session_id, SESSION_MODEL, entry.name, now=now)
        ops.update_session_model(conn, session_id, entry.name)  # the session row says it too (insights)

    await s.store.write(op)
    log.info("models.session_switched", session_id=session_id, model=entry.name, was=current)
    return f"🔀 This session now uses {entry.shown} (was {current}). /new starts with the default again."


async def _global(ctx: CommandContext, words: list[str]) -> str:
    s, msg, config = ctx.services, ctx.message, ctx.services.config.settings
    if not s.owners.is_owner(msg.platform, msg.user_id):
        return "⛔ Only an owner of this gateway (auth.owners) can change the default model for everyone."
    if len(words) != 1:
        chosen = await s.store.read(lambda c: settings.get_global(c, GLOBAL_MODEL))
        return f"The default for everyone is {chosen or config.model.default}. {USAGE}"
    entry = _resolve(config, words[0])
    if isinstance(entry, str):
        return entry
    now, by = time.time(), f"{msg.platform}:{msg.user_id}"

    def op(conn: sqlite3.Connection) -> str | None:
        before = settings.get_global(conn, GLOBAL_MODEL)
        if before != entry.name:
            settings.set_global(conn, GLOBAL_PREVIOUS, before or "", updated_by=by, now=now)
            settings.set_global(conn, GLOBAL_MODEL, entry.name, updated_by=by, now=now)
        return before

    before = await s.store.write(op)
    log.info("models.global_switched", model=entry.name, was=before, by=by)
    return (f"🔀 The default model for everyone is now {entry.shown} (was {before or config.model.default}). "
            "Sessions that chose their own with /model and channels set in config.yaml keep theirs.")


async def _show(ctx: CommandContext) -> str | None:
    s, msg, config = ctx.services, ctx.message, ctx.services.config.settings
    session_id = await s.index.current(ctx.session_key)
    current, source = await effective_model(s.store, config, msg, session_id)
    if current is None:
        return "No model is configured: set model.default (and models.allowed) in config.yaml."
    text = f"Model: {current} ({_FROM[source]})"
    allowed = allowed_models(config)
    adapter = s.adapters.get(msg.platform)
    if isinstance(adapter, ChoiceMenus) and 1 < len(allowed) <= MAX_OPTIONS and not msg.awaits_answer:
        names = [e.name for e in allowed]
        picker = s.pickers.open(msg, names)
        prompt = ChoicePrompt("model", picker.id, f"{text}\nChoose the model for this session:",
                              tuple(e.shown for e in allowed),
                              current=names.index(current) if current in names else None)
        try:
            picker.message_id = await adapter.send_choices(_target(picker, msg.message_id), prompt)
        except Exception as exc:  # the listing below says the same in words
            log.warning("models.menu_failed", error_type=type(exc).__name__, error=str(exc))
            s.pickers.close(picker.id)
        else:
            return None
    return f"{text}\n{_listing(config, current)}\nSwitch with /model <name>."


def _target(picker: ModelPicker, reply_to: str | None) -> OutboundMessage:
    return OutboundMessage(picker.platform, picker.chat_id, "", picker.thread_id, reply_to)


async def _pick(ctx: CommandContext, words: list[str]) -> str | None:
    """A press on a model menu: only its own person, only while it is current."""
    s, msg = ctx.services, ctx.message
    picker = s.pickers.get(words[0]) if len(words) == 2 and words[1].isdigit() else None
    stale = "⌛ That model menu is no longer current. Send /model for a new one."
    if picker is None or (picker.platform, picker.chat_id) != (msg.platform, msg.chat_id):
        return stale
    if picker.message_id is not None and msg.message_id is not None and msg.message_id != picker.message_id:
        return stale
    if picker.user_id != msg.user_id:
        return f"⚠️ This model menu is {picker.user_name or 'someone else'}'s. Send /model for your own."
    index = int(words[1])
    if index >= len(picker.names):
        return stale
    s.pickers.close(picker.id)
    reply = await _switch(ctx, picker.names[index])
    if picker.message_id is None:
        return reply
    adapter = s.adapters.get(msg.platform)
    try:
        if adapter is None:
            return reply
        await adapter.settle_approval(_target(picker, None), picker.message_id, reply)
    except Exception as exc:  # the reply says it instead
        log.warning("models.menu_settle_failed", error_type=type(exc).__name__, error=str(exc))
        return reply
    return None


async def _model(ctx: CommandContext) -> str | None:
    words = ctx.args.split()
    if words[:1] == ["--pick"]:
        return await _pick(ctx, words[1:])
    if words[:1] == ["--global"]:
        return await _global(ctx, words[1:])
    if any(w.startswith("--") for w in words) or len(words) > 1:
        return USAGE
    return await _switch(ctx, words[0]) if words else await _show(ctx)


def register_model_commands(registry: CommandRegistry) -> None:
    registry.register(Command("model", "show or switch the model (--global: for everyone, owners)", _model,
                              usage="[name] | --global name"))
