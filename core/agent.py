"""The agent interface and the minimal agent: one model call, no tools.

An agent is created fresh for every message from the session id alone: the
stored system prompt and the history come from state.db, and every message
it produces is persisted (and awaited) the moment it exists. Nothing about a
conversation outlives the turn in this object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from .errors import ModelNotConfiguredError
from .llm import ModelClient
from .prompt import PromptContext, build_system_prompt

log = structlog.get_logger("hermes.agent")


class TranscriptStore(Protocol):
    """The narrow slice of storage the agent may use."""

    async def load_conversation(self, session_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]: ...

    async def persist_message(
        self, session_id: str, message: Mapping[str, Any], *, usage: Mapping[str, Any] | None = None
    ) -> int | None: ...

    async def update_system_prompt(self, session_id: str, system_prompt: str) -> None: ...


@dataclass(frozen=True)
class TurnRequest:
    session_id: str
    session_key: str
    platform: str
    chat_type: str
    text: str
    user_id: str | None = None
    user_name: str | None = None
    shared_session: bool = False


@dataclass
class TurnResult:
    text: str
    message_ids: list[int] = field(default_factory=list)
    model: str | None = None


class Agent(Protocol):
    async def run_turn(self, request: TurnRequest) -> TurnResult: ...


AgentFactory = Callable[[TurnRequest], Agent]

NOT_CONFIGURED_REPLY = (
    "No AI model is configured yet. Set model.base_url and model.default in "
    "$HERMES_HOME/config.yaml (or HERMES_MODEL_BASE_URL and HERMES_MODEL) and restart the gateway."
)


class MinimalAgent:
    """One model call per turn. The full agent (tools, memory) replaces it later."""

    def __init__(self, store: TranscriptStore, client: ModelClient) -> None:
        self._store = store
        self._client = client

    async def _system_prompt(self, request: TurnRequest, session: dict[str, Any] | None) -> str:
        stored = session.get("system_prompt") if session else None
        if stored:
            return str(stored)
        prompt = build_system_prompt(
            PromptContext(request.platform, request.chat_type, request.shared_session, request.user_name)
        )
        await self._store.update_system_prompt(request.session_id, prompt)
        return prompt

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        session, history = await self._store.load_conversation(request.session_id)
        system = await self._system_prompt(request, session)
        user_msg = {"role": "user", "content": request.text}
        ids: list[int] = []
        user_id = await self._store.persist_message(request.session_id, user_msg)
        if user_id is not None:
            ids.append(user_id)
        if not self._client.settings.configured:
            # The user's words are kept; the missing model is not a conversation turn.
            raise ModelNotConfiguredError(NOT_CONFIGURED_REPLY)
        result = await self._client.chat([{"role": "system", "content": system}, *history, user_msg])
        message = dict(result.message)
        message.setdefault("role", "assistant")
        if result.finish_reason:
            message["finish_reason"] = result.finish_reason
        if result.usage.output_tokens:
            message["token_count"] = result.usage.output_tokens
        usage = {
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
            "cache_read_tokens": result.usage.cache_read_tokens,
            "cache_write_tokens": result.usage.cache_write_tokens,
            "reasoning_tokens": result.usage.reasoning_tokens,
            "api_call_count": 1,
        }
        # The answer and what it cost commit together.
        row = await self._store.persist_message(request.session_id, message, usage=usage)
        if row is not None:
            ids.append(row)
        text = message.get("content") or ""
        if not isinstance(text, str):
            text = str(text)
        return TurnResult(text=text or "(no response)", message_ids=ids, model=result.model)
