"""The agent interface and the agent itself (tools, compression, learning loop).

An agent is created fresh for every message from the session id alone: the
stored system prompt and the history come from state.db, and every message
it produces is persisted (and awaited) the moment it exists. Nothing about a
conversation outlives the turn in this object.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from ._background import BackgroundTasks
from ._budget import turn_budget
from ._loop import FinalOp, LoopResult, ToolLoop, repair_history
from ._settings import AgentSettings
from .compression import CompressOutcome
from .errors import CompressionError, ModelContextLengthError, ModelError, ModelNotConfiguredError
from .learning import CounterUpdate
from .llm import ModelClient, Usage
from .media.history import ImageRecall, with_images
from .model_choice import ModelChoice
from .streaming import AnswerListener
from .tools import Approver, CronPort, FileOutbox, ToolContext, ToolRegistry

if TYPE_CHECKING:
    from storage import Store

log = structlog.get_logger("hermes.agent")


#: (connection, session id, the answer's text): bookkeeping of the caller's that commits in the
#: answer's own transaction (the gateway's outbox row for the reply)
AnswerOp = Callable[[sqlite3.Connection, str, str], None]
#: (connection, session id): bookkeeping of the caller's that commits with the user's message
QuestionOp = Callable[[sqlite3.Connection, str], None]
#: (connection, session id, the user message's row id): rows of the caller's that belong to that
#: message and commit with it (the gateway's attachment rows)
LinkOp = Callable[[sqlite3.Connection, str, int], None]


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
    #: the caller's bookkeeping that commits with the user's message (the gateway's "seen" record)
    on_question: QuestionOp | None = None
    on_answer: AnswerOp | None = None
    #: ``text`` is already stored as the session's latest user message (a retried request whose
    #: turn a crash cut off): the turn answers it without storing it again
    question_stored: bool = False
    #: gets the answer as the model writes it (``core.streaming``); None: the answer comes whole
    listener: AnswerListener | None = None
    #: content parts the model sees with ``text`` in this turn (images); state.db keeps ``text`` only,
    #: whose markers stand for them
    parts: tuple[dict[str, Any], ...] = ()
    #: rows that belong to the stored user message (its attachments)
    link: LinkOp | None = None
    #: the images of the last ``image_history_turns`` user messages that had any go to the model again
    recall_images: ImageRecall | None = None
    image_history_turns: int = 0
    #: where ``send_file`` puts the answer's files (None: this turn cannot send files)
    files: FileOutbox | None = None
    #: asks the person of this turn before a dangerous action (None: such actions are refused)
    approver: Approver | None = None
    #: the scheduled jobs of this turn's chat, for the ``cronjob`` tool (None: not available here)
    cron: CronPort | None = None
    #: only tools of these toolsets, within what the platform allows (a scheduled job's own
    #: toolsets); None: every tool the platform allows
    toolsets: frozenset[str] | None = None
    #: the model of this turn (the gateway's /model); None: ``model.default``
    model: ModelChoice | None = None


def _final_ops(session_id: str, counters: CounterUpdate | None, on_answer: AnswerOp | None) -> FinalOp | None:
    """What commits with the answer: the learning counters and the caller's bookkeeping."""
    if counters is None and on_answer is None:
        return None

    def make(tool_iterations: int, used_tools: set[str], answer: str) -> Callable[[sqlite3.Connection], None]:
        count = counters.op(tool_iterations, used_tools) if counters is not None else None

        def run(conn: sqlite3.Connection) -> None:
            if count is not None:
                count(conn)
            if on_answer is not None:
                on_answer(conn, session_id, answer)

        return run

    return make


@dataclass
class TurnResult:
    text: str
    message_ids: list[int] = field(default_factory=list)
    model: str | None = None
    #: token counts summed over the turn's model calls
    usage: Usage = field(default_factory=Usage)
    #: the turn's chosen model, which the server rejected (the turn ran on its fallback)
    rejected_model: str | None = None
    #: what the model reasoned on the way (its calls' reasoning, joined); None: it said nothing of it
    reasoning: str | None = None


class Agent(Protocol):
    async def run_turn(self, request: TurnRequest) -> TurnResult: ...


class AgentHost(Protocol):
    """What an agent uses of the runtime it runs in; ``AgentRuntime`` is the one implementation.

    Declared here rather than imported so that the dependency points one way:
    the runtime builds agents, and an agent never imports the runtime.
    """

    store: Store
    client: ModelClient
    settings: AgentSettings
    background: BackgroundTasks

    def tools_for(self, platform: str, chat_type: str | None = None) -> ToolRegistry: ...

    def tool_context(self, session_id: str, platform: str, *, user_id: str | None = None,
                     session_key: str | None = None, files: FileOutbox | None = None,
                     approver: Approver | None = None, chat_type: str | None = None,
                     cron: CronPort | None = None) -> ToolContext: ...

    async def build_prompt(self, platform: str, chat_type: str, *, shared: bool = False,
                           user_name: str | None = None) -> str: ...

    def needs_compression(self, system: str, conversation: Sequence[dict[str, Any]]) -> bool: ...

    async def compress(self, session_key: str, session_id: str, *,
                       platform: str | None = None, chat_type: str | None = None) -> CompressOutcome: ...

    async def review(self, session_id: str, platform: str, session_key: str, system: str,
                     snapshot: Sequence[dict[str, Any]], *, memory: bool, skills: bool) -> set[str]: ...

    async def title(self, session_id: str, user_text: str, reply_text: str) -> None: ...


NOT_CONFIGURED_REPLY = (
    "No AI model is configured yet. Set model.base_url and model.default in "
    "$HERMES_HOME/config.yaml (or HERMES_MODEL_BASE_URL and HERMES_MODEL) and restart the gateway."
)


class HermesAgent:
    """The agent of one message: model ⇄ tools until an answer, every message persisted as it is produced.

    Built fresh per message by ``AgentRuntime.agent``; all it knows about the
    conversation it reads from state.db at the start of ``run_turn``.
    """

    def __init__(self, runtime: AgentHost, *, nudges: bool = True) -> None:
        self._rt = runtime
        self._nudges = nudges

    async def _system_prompt(self, request: TurnRequest, session_id: str, session: dict[str, Any] | None) -> str:
        stored = session.get("system_prompt") if session else None
        if stored:
            return str(stored)
        prompt = await self._rt.build_prompt(request.platform, request.chat_type, shared=request.shared_session,
                                             user_name=request.user_name)
        await self._rt.store.update_system_prompt(session_id, prompt)
        return prompt

    async def _maybe_compress(self, request: TurnRequest, session_id: str, system: str,
                              history: list[dict[str, Any]], user_msg: dict[str, Any]) -> str:
        """The session to continue in: a compressed child when the prompt has grown past the threshold."""
        if not self._rt.needs_compression(system, [*history, user_msg]):
            return session_id
        try:
            outcome = await self._rt.compress(request.session_key, session_id, platform=request.platform,
                                              chat_type=request.chat_type)
        except (ModelError, CompressionError, ValueError) as exc:
            # The turn may still fit; the next message tries again.
            log.warning("agent.compression_failed", error=str(exc))
            return session_id
        return outcome.split.new_session_id if outcome.split else session_id

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        # One time budget for every model call of the turn: a compression's, each tool step's, the answer's.
        with turn_budget(self._rt.client.settings.turn_timeout):
            return await self._run_turn(request)

    async def _run_turn(self, request: TurnRequest) -> TurnResult:
        rt = self._rt
        session_id = request.session_id
        session, history = await rt.store.load_conversation(session_id)
        system = await self._system_prompt(request, session_id, session)
        # A turn that was stopped or crashed mid-tool left calls without results: close them first.
        for synthetic in repair_history(history):
            await rt.store.persist_message(session_id, synthetic)
        ids: list[int] = []
        if request.question_stored:
            first_exchange = sum(1 for m in history if m.get("role") == "user") == 1
            conversation = history
        else:
            user_msg = {"role": "user", "content": request.text}
            if rt.client.settings.configured:
                moved = await self._maybe_compress(request, session_id, system, history, user_msg)
                if moved != session_id:
                    session_id = moved
                    session, history = await rt.store.load_conversation(session_id)
                    system = await self._system_prompt(request, session_id, session)
            first_exchange = not any(m.get("role") == "user" for m in history)
            on_question, link, asked_in = request.on_question, request.link, session_id
            also = (lambda conn: on_question(conn, asked_in)) if on_question is not None else None
            linked = (lambda conn, row: link(conn, asked_in, row)) if link is not None else None
            row = await rt.store.persist_message(session_id, user_msg, also=also, linked=linked)
            if row is not None:
                ids.append(row)
            conversation = [*history, user_msg]
        if not rt.client.settings.configured:
            # The user's words are kept; the missing model is not a conversation turn.
            raise ModelNotConfiguredError(NOT_CONFIGURED_REPLY)
        result = LoopResult(text="", message_ids=ids)
        s = rt.settings
        counters = (CounterUpdate(request.session_key, s.memory_nudge_interval, s.skill_nudge_interval)
                    if self._nudges and (s.memory_nudge_interval or s.skill_nudge_interval) else None)
        try:
            conversation = await self._run_with_images(request, session_id, system, conversation, result, counters)
        except ModelContextLengthError:
            # The provider counts tokens differently from our estimate: compress now and try once more,
            # on what is left of this turn's budget (``result`` counts the calls already made).
            outcome = await rt.compress(request.session_key, session_id, platform=request.platform,
                                        chat_type=request.chat_type)
            if outcome.split is None:
                raise
            session_id = outcome.split.new_session_id
            session, conversation = await rt.store.load_conversation(session_id)
            system = await self._system_prompt(request, session_id, session)
            conversation = await self._run_with_images(request, session_id, system, conversation, result, counters)
        try:
            await self._after_turn(request, session_id, session, system, conversation, result, first_exchange,
                                   counters)
        except Exception:  # bookkeeping for reviews and titles must never cost the user the answer
            log.exception("agent.after_turn_failed", session_id=session_id)
        return TurnResult(text=result.text, message_ids=result.message_ids, model=result.model, usage=result.usage,
                          rejected_model=result.rejected_model,
                          reasoning="\n\n".join(result.reasoning) or None)

    async def _run_with_images(self, request: TurnRequest, session_id: str, system: str,
                               conversation: list[dict[str, Any]], result: LoopResult,
                               counters: CounterUpdate | None) -> list[dict[str, Any]]:
        """The loop, on ``conversation`` with this turn's and the last turns' images in it; returns
        ``conversation`` as text again (what state.db holds) with the messages the loop added."""
        seen = await with_images(conversation, request.parts, recall=request.recall_images,
                                 turns=request.image_history_turns, session_id=session_id)
        await self._run_loop(request, session_id, system, seen, result, counters)
        return [*conversation, *seen[len(conversation):]]

    async def _run_loop(self, request: TurnRequest, session_id: str, system: str,
                        conversation: list[dict[str, Any]], result: LoopResult,
                        counters: CounterUpdate | None) -> None:
        rt = self._rt
        ctx = rt.tool_context(session_id, request.platform, user_id=request.user_id, session_key=request.session_key,
                              files=request.files, approver=request.approver, chat_type=request.chat_type,
                              cron=request.cron)
        tools = rt.tools_for(request.platform, request.chat_type)
        if request.toolsets is not None:
            tools = tools.in_toolsets(request.toolsets)
        if request.cron is None and "cronjob" in tools:
            # nowhere to make a job from this turn (a scheduled run's own, a custom host): not offered
            tools = tools.only(name for name in tools.names if name != "cronjob")
        loop = ToolLoop(rt.store, rt.client, tools, ctx,
                        max_iterations=rt.settings.max_iterations,
                        on_final=_final_ops(session_id, counters, request.on_answer), listener=request.listener,
                        choice=request.model)
        try:
            await loop.run(system, conversation, result)
        except asyncio.CancelledError:
            await asyncio.shield(self._close_cancelled(loop, session_id))
            raise

    async def _close_cancelled(self, loop: ToolLoop, session_id: str) -> None:
        """/stop: make what is stored consistent (every tool call answered) before the cancel goes on."""
        await loop.settle()
        try:
            stored = await self._rt.store.get_messages_as_conversation(session_id)
            for synthetic in repair_history(stored):
                await self._rt.store.persist_message(session_id, synthetic)
        except Exception:  # the next turn repairs it too
            log.exception("agent.cancel_repair_failed", session_id=session_id)
        log.info("agent.turn_cancelled", session_id=session_id)

    async def _after_turn(self, request: TurnRequest, session_id: str, session: dict[str, Any] | None,
                          system: str, conversation: list[dict[str, Any]], result: LoopResult,
                          first_exchange: bool, counters: CounterUpdate | None) -> None:
        rt = self._rt
        if counters is not None:
            due = counters.due  # advanced in the answer's own transaction
            if due:
                log.info("agent.review_due", memory=due.memory, skills=due.skills)
                rt.background.spawn(
                    rt.review(session_id, request.platform, request.session_key, system, list(conversation),
                              memory=due.memory, skills=due.skills),
                    name=f"review:{session_id}",
                )
        titled = bool(session and session.get("title"))
        if rt.settings.auto_title and first_exchange and not titled and not result.exhausted:
            rt.background.spawn(rt.title(session_id, request.text, result.text), name=f"title:{session_id}")
