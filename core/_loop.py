"""The model ⇄ tools loop shared by a turn, a background review and a memory flush.

Each message is persisted the moment it exists (the assistant message with
its tool calls, then each tool result, then the answer), and the write is
awaited before the loop moves on: there is no list index to keep in step
with the database, so nothing can be skipped. A loop with ``persist=False``
(reviews, flushes) keeps its messages to itself.

A turn's loop may stream (a ``listener``): the text of a model call that turns
out to ask for tools is discarded (it was a preamble), each tool call is
announced before it runs, and ``/stop`` while an answer is being written stores
what was written of it, marked ``finish_reason: "stopped"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import sqlite3
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from ._stream import Relay
from .errors import ModelRejectedError
from .llm import ChatResult, ModelClient, Usage, describe_size
from .model_choice import ModelChoice
from .prompt import apply_prompt_caching, is_anthropic_model
from .streaming import AnswerListener
from .tools import ToolContext, ToolRegistry

if TYPE_CHECKING:
    from storage import Store

log = structlog.get_logger("hermes.agent")

# Left over after JSON decoding only when unpaired; SQLite and every platform refuse them.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

#: (tool iterations, tools used, the answer's text) of the finished turn -> an op to commit with the answer
FinalOp = Callable[[int, set[str], str], Callable[[sqlite3.Connection], None]]

CANCELLED_RESULT = "Cancelled: the turn was stopped before this tool call finished. Nothing more was done."


def cut_note(cut_at: int) -> str:
    """What an answer cut at ``model.max_response_bytes`` ends with, so that the user (and the model,
    when the history is replayed) knows the rest is missing."""
    return f"[the model's answer was cut at {describe_size(cut_at)}: model.max_response_bytes]"


def budget_message(limit: int) -> str:
    return (
        f"I stopped after {limit} steps without finishing (the limit per message is {limit}). "
        "Reply \"continue\" and I will pick up where I left off, or narrow the request."
    )


@dataclass
class LoopResult:
    text: str
    model: str | None = None
    message_ids: list[int] = field(default_factory=list)
    #: model calls answered so far; the budget counts these, also across a retry of the same turn
    model_calls: int = 0
    #: model calls that asked for tools
    tool_iterations: int = 0
    used_tools: set[str] = field(default_factory=set)
    exhausted: bool = False
    #: token counts summed over the model calls answered so far
    usage: Usage = field(default_factory=Usage)
    #: the chosen model the server rejected as unknown; the turn went on with its fallback
    rejected_model: str | None = None
    #: what the model reasoned in each call of the turn (``reasoning_content``/``reasoning``), in order
    reasoning: list[str] = field(default_factory=list)


# Kept with a message in state.db, but not part of the chat format: strict providers refuse them.
_LOCAL_KEYS = frozenset({"finish_reason", "token_count", "timestamp"})


def _wire(message: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in _LOCAL_KEYS}


def _added(total: Usage, more: Usage) -> Usage:
    return Usage(**{f.name: getattr(total, f.name) + getattr(more, f.name) for f in dataclasses.fields(Usage)})


def scrub_text(text: str) -> str:
    """Lone surrogates (a model's broken emoji) replaced by U+FFFD, so the answer can be stored and sent."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def normalize_tool_calls(calls: Sequence[Any]) -> list[dict[str, Any]]:
    """Tool calls in the OpenAI shape, each with an id (a provider that omits one still gets answers).

    Extra keys of a call or its function are kept as the provider sent them.
    """
    out: list[dict[str, Any]] = []
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        raw_fn = call.get("function")
        fn: Mapping[str, Any] = raw_fn if isinstance(raw_fn, Mapping) else {}
        name = fn.get("name") if isinstance(fn.get("name"), str) else ""
        arguments = fn.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else f"call_{uuid.uuid4().hex[:24]}"
        # Keys we do not know stay (Gemini's thought signatures live there and must be replayed).
        out.append({**call, "id": call_id, "type": "function",
                    "function": {**fn, "name": name, "arguments": arguments}})
    return out


def dangling_tool_calls(history: Sequence[Mapping[str, Any]]) -> list[tuple[int, list[dict[str, Any]]]]:
    """Assistant tool calls without a result: ``(insert_at, synthetic results)`` per gap, in order.

    A turn that was stopped or crashed between the assistant message and its
    results leaves such gaps; replaying them would make providers reject the
    whole conversation.
    """
    gaps: list[tuple[int, list[dict[str, Any]]]] = []
    i = 0
    while i < len(history):
        msg = history[i]
        calls = msg.get("tool_calls") if msg.get("role") == "assistant" else None
        i += 1
        if not isinstance(calls, list) or not calls:
            continue
        answered: set[str] = set()
        while i < len(history) and history[i].get("role") == "tool":
            answered.add(str(history[i].get("tool_call_id")))
            i += 1
        missing = [
            {"role": "tool", "tool_call_id": c.get("id"), "name": (c.get("function") or {}).get("name"),
             "content": CANCELLED_RESULT}
            for c in calls
            if isinstance(c, Mapping) and str(c.get("id")) not in answered
        ]
        if missing:
            gaps.append((i, missing))
    return gaps


def repair_history(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``history`` with a synthetic result for every unanswered tool call (in place); returns the trailing ones."""
    trailing: list[dict[str, Any]] = []
    for insert_at, missing in reversed(dangling_tool_calls(history)):
        if insert_at == len(history):
            trailing = missing
        history[insert_at:insert_at] = missing
    return trailing


class ToolLoop:
    """One run of the loop against one session; build a new one per run."""

    def __init__(
        self,
        store: Store,
        client: ModelClient,
        tools: ToolRegistry,
        ctx: ToolContext,
        *,
        max_iterations: int,
        persist: bool = True,
        model: str | None = None,
        tool_choice: str | None = None,
        on_final: FinalOp | None = None,
        listener: AnswerListener | None = None,
        choice: ModelChoice | None = None,
    ) -> None:
        """``on_final(tool_iterations, used_tools, answer)`` gives bookkeeping to commit with the answer;
        ``listener`` gets the answer as it is written; ``choice`` (instead of ``model``) the model with
        its prices (each call's cost is stored with its tokens) and its fallback."""
        self._on_final = on_final
        self._relay = Relay(listener) if listener is not None else None
        self._store = store
        self._client = client
        self._tools = tools
        self._ctx = ctx
        self._max = max_iterations
        self._persist_enabled = persist
        self._choice = choice
        self._model = choice.name if choice is not None else model
        self._tool_choice = tool_choice
        self._inflight: asyncio.Future[int | None] | None = None

    @property
    def session_id(self) -> str:
        return self._ctx.session_id

    async def persist(self, message: Mapping[str, Any], usage: Mapping[str, Any] | None = None,
                      also: Callable[[sqlite3.Connection], None] | None = None) -> int | None:
        """Write one message and wait for its COMMIT; a cancelled caller does not cancel the write."""
        if not self._persist_enabled:
            if usage:
                await self._store.record_usage(self.session_id, **usage)
            return None
        fut = asyncio.ensure_future(self._store.persist_message(self.session_id, message, usage=usage, also=also))
        self._inflight = fut
        return await asyncio.shield(fut)

    async def settle(self) -> None:
        """Wait for a write that a cancellation interrupted, so the database is final before repair."""
        fut, self._inflight = self._inflight, None
        if fut is not None and not fut.done():
            with contextlib.suppress(Exception):
                await fut

    async def run(self, system: str, conversation: list[dict[str, Any]], result: LoopResult | None = None) -> LoopResult:
        """Run until an answer or the budget; ``conversation`` grows with every produced message.

        The budget is spent on ``result``: a run handed the result of an earlier
        run of the same turn (the retry after compression) only gets what is left.
        """
        out = result or LoopResult(text="")
        schemas = self._tools.schemas() or None
        while out.model_calls < self._max:
            model_name = self._model or self._client.settings.model
            messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                              *(_wire(m) for m in conversation)]
            if is_anthropic_model(model_name):
                # 5m is the provider's default lifetime: the markers stay as they always were.
                ttl = self._client.settings.cache_ttl
                messages = apply_prompt_caching(messages, ttl=None if ttl == "5m" else ttl)
            extra = {"tool_choice": self._tool_choice} if self._tool_choice and schemas else None
            try:
                reply = await self._client.chat(messages, tools=schemas, model=self._model, extra=extra,
                                                listener=self._relay)
            except asyncio.CancelledError:
                await self._store_stopped()
                raise
            except ModelRejectedError as exc:
                if not self._fall_back(out, exc):
                    raise
                continue
            out.model_calls += 1
            out.model = reply.model or out.model
            out.usage = _added(out.usage, reply.usage)
            message = self._assistant_message(reply)
            thought = message.get("reasoning_content") or message.get("reasoning")
            if isinstance(thought, str) and thought.strip():
                out.reasoning.append(thought.strip())
            calls = message.get("tool_calls") or []
            text = message.get("content")
            answer = text if isinstance(text, str) and text.strip() else "(no response)"
            also = self._final_op(out, answer) if not calls else None
            row = await self.persist(message, self._usage_columns(reply.usage), also)
            if row is not None:
                out.message_ids.append(row)
            if not calls:
                out.text = answer
                if not (isinstance(text, str) and text.strip()) and row is None:
                    return out  # an empty placeholder is never stored, and needs no place in history
                conversation.append(message)
                return out
            conversation.append(message)
            out.tool_iterations += 1
            if self._relay is not None and self._relay.given:
                self._relay.discard()  # the text before tool calls is not the answer
            for call in calls:
                name = call["function"]["name"]
                if self._relay is not None:
                    self._relay.tool(name)
                outcome = await self._tools.dispatch(name, call["function"]["arguments"], self._ctx)
                if outcome.ok:
                    out.used_tools.add(name)
                log.info("tool.called", tool=name, ok=outcome.ok, chars=len(outcome.content))
                tool_msg = {"role": "tool", "tool_call_id": call["id"], "name": name,
                            "content": scrub_text(outcome.content)}
                row = await self.persist(tool_msg)
                if row is not None:
                    out.message_ids.append(row)
                conversation.append(tool_msg)
        out.exhausted = True
        out.text = budget_message(self._max)
        final = {"role": "assistant", "content": out.text, "finish_reason": "iteration_limit"}
        row = await self.persist(final, also=self._final_op(out, out.text))
        if row is not None:
            out.message_ids.append(row)
        conversation.append(final)
        log.warning("agent.iteration_budget_spent", limit=self._max)
        return out

    def _fall_back(self, out: LoopResult, exc: ModelRejectedError) -> bool:
        """The chosen model is not served: go on with its fallback (once), saying so in ``out``."""
        choice = self._choice
        if choice is None or choice.fallback is None:
            return False
        log.warning("agent.model_rejected", model=choice.name, fallback=choice.fallback.name, error=str(exc))
        out.rejected_model = choice.name
        self._choice = choice.fallback
        self._model = choice.fallback.name
        return True

    def _usage_columns(self, usage: Usage) -> dict[str, Any]:
        columns: dict[str, Any] = dict(usage.session_columns())
        prices = self._choice.prices if self._choice is not None else None
        if prices is not None:
            columns["estimated_cost_usd"] = prices.cost(usage)
        return columns

    async def _store_stopped(self) -> None:
        """/stop while the answer was being written: what was written of it is kept, said to be stopped."""
        text = self._relay.partial if self._relay is not None else ""
        if not text.strip():
            return
        message = {"role": "assistant", "content": scrub_text(text), "finish_reason": "stopped"}
        # The write is shielded (``persist``) and ``settle`` waits for it; a second cancel only stops the wait.
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await self.persist(message)

    def _final_op(self, out: LoopResult, answer: str) -> Callable[[sqlite3.Connection], None] | None:
        return self._on_final(out.tool_iterations, out.used_tools, answer) if self._on_final is not None else None

    @staticmethod
    def _assistant_message(reply: ChatResult) -> dict[str, Any]:
        message = dict(reply.message)
        message["role"] = "assistant"
        for key in ("content", "reasoning", "reasoning_content"):
            if isinstance(message.get(key), str):
                message[key] = scrub_text(message[key])
        if reply.cut_at is not None:
            # The answer ends here, said to be cut; tool calls after the cut would be cut too.
            content = message.get("content")
            text = content.rstrip() if isinstance(content, str) else ""
            message["content"] = f"{text}\n\n{cut_note(reply.cut_at)}" if text else cut_note(reply.cut_at)
            message.pop("tool_calls", None)
            message["finish_reason"] = "length"
            return message
        if "tool_calls" in message:
            calls = normalize_tool_calls(message["tool_calls"] or [])
            if calls:
                message["tool_calls"] = calls
            else:
                del message["tool_calls"]
        if reply.finish_reason:
            message["finish_reason"] = reply.finish_reason
        if reply.usage.output_tokens:
            message["token_count"] = reply.usage.output_tokens
        return message
