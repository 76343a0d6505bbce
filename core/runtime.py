"""What every fresh agent of one daemon shares: store, model client, tools, settings, background tasks.

The runtime lives as long as the daemon; an agent lives for one message. The
runtime also runs what is not a user turn: the memory flush before a
session ends, compression, the background reviews and auto-titles.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from storage.errors import SessionNotFoundError

from ._background import BackgroundTasks
from ._loop import ToolLoop, repair_history
from ._settings import AgentSettings
from ._skill_needs import SkillNeeds
from .agent import HermesAgent, TurnRequest
from .compression import (
    CompressOutcome,
    RebindOp,
    SplitResult,
    estimate_tokens,
    keep_budget,
    kept_message_chars,
    plan_split,
    recent_window,
    split_session_op,
    summarise,
)
from .errors import CompressionError
from .learning import MEMORY_TOOL, SKILL_TOOL, review_prompt
from .llm import ModelClient
from .prompt import PromptContext, SkillEntry, build_system_prompt
from .titles import auto_title
from .tools import (
    GROUP_CHAT_TYPES,
    Approver,
    CronPort,
    FileOutbox,
    ToolContext,
    ToolOverview,
    ToolRegistry,
    builtin_registry,
    tool_overview,
)
from .tools.send_file import file_roots

#: what the model is told of a /btw question
BTW_NOTE = ("\n\nThe user now asks a side question about this conversation. Answer it briefly; your answer "
            "is not added to the conversation.")

if TYPE_CHECKING:
    from storage import Store

    from .tools.mcp import McpManager

log = structlog.get_logger("hermes.agent")

FLUSH_PROMPT = (
    "[System: this session is about to be compressed or closed, and older messages will no longer be "
    "visible. Save anything worth remembering with the memory tool now (preferences, facts about the user, "
    "lessons learned). If nothing needs saving, reply 'nothing to save'.]"
)
RESET_FLUSH_PROMPT = (
    "[System: this session is being reset, and the next conversation starts without it. Save anything worth "
    "remembering now: durable facts and preferences with the memory tool, and any reusable multi-step "
    "procedure worked out here as a skill with skill_manage (check skills_list first to patch an existing "
    "one rather than duplicating it). If nothing needs saving, reply 'nothing to save'.]"
)
FLUSH_MAX_ITERATIONS = 3
REVIEW_TOOLS = ("memory", "skills_list", "skill_view", "skill_manage")


def _snapshot_sections(home: Path, needs: SkillNeeds) -> tuple[str, str, list[SkillEntry]]:
    """Frozen memory text and the index of the skills ``needs`` meets, read from disk now (empty when
    unavailable)."""
    memory = user = ""
    skills: list[SkillEntry] = []
    try:
        from .memory import MemoryStore

        snap = MemoryStore(home).snapshot()
        memory, user = snap.memory, snap.user
    except ImportError:
        pass
    except Exception:  # an unreadable memory file must not stop the conversation
        log.exception("prompt.memory_unreadable")
    try:
        from .skills import SkillStore

        skills = [SkillEntry(s.name, s.description) for s in SkillStore(home, needs).index()]
    except ImportError:
        pass
    except Exception:
        log.exception("prompt.skills_unreadable")
    return memory, user, skills


class AgentRuntime:
    def __init__(
        self,
        store: Store,
        client: ModelClient,
        settings: AgentSettings | None = None,
        *,
        home: Path,
        registry: ToolRegistry | None = None,
        rebind_op: RebindOp | None = None,
        mcp: McpManager | None = None,
    ) -> None:
        self.store = store
        #: re-points a chat key at a session inside a write transaction (the gateway's session
        #: index supplies it, so core need not know its table); None = no chat to follow
        self.rebind_op = rebind_op
        self.client = client
        self.settings = settings or AgentSettings()
        self.home = home
        self.registry = registry if registry is not None else builtin_registry()
        #: the daemon's MCP servers, shared by every agent (None: no MCP tools)
        self.mcp = mcp
        self.background = BackgroundTasks()
        # tools_for runs several times a turn: the combined registry and its per-chat views are kept
        # until the tool set changes (an MCP server came or went, a tool was registered)
        self._combined_key: tuple[object, ...] | None = None
        self._combined = self.registry
        self._views: dict[tuple[str, bool], ToolRegistry] = {}

    @property
    def aux_model(self) -> str | None:
        return self.client.settings.auxiliary_model or self.client.settings.model

    def all_tools(self) -> ToolRegistry:
        """The built-in registry plus the tools of the MCP servers that are ready now."""
        key = (len(self.registry), self.mcp.revision if self.mcp is not None else None)
        if key != self._combined_key:
            combined = self.registry
            if self.mcp is not None:
                combined, skipped = self.registry.merged(self.mcp.tools())
                if skipped:
                    log.warning("tools.mcp_skipped", tools=skipped, why="name taken or invalid schema")
            self._combined, self._combined_key, self._views = combined, key, {}
        return self._combined

    def tools_for(self, platform: str, chat_type: str | None = None) -> ToolRegistry:
        """What an agent on ``platform`` may call, in a chat of ``chat_type`` (groups get less)."""
        combined = self.all_tools()
        group = chat_type in GROUP_CHAT_TYPES
        view = self._views.get((platform, group))
        if view is None:
            view = combined.for_platform(self.settings.policy(platform), chat_type, self.settings.groups)
            self._views[(platform, group)] = view
        return view

    def tool_overview(self, platform: str, chat_type: str | None = None) -> ToolOverview:
        """Every tool for a chat, on offer or not and why (``/tools``)."""
        servers = self.mcp.status() if self.mcp is not None else ()
        return tool_overview(self.all_tools(), self.settings.policy(platform), self.settings.groups, platform,
                             chat_type, servers)

    def agent(self, request: TurnRequest, *, nudges: bool = True) -> HermesAgent:
        return HermesAgent(self, nudges=nudges)

    def tool_context(self, session_id: str, platform: str, *, user_id: str | None = None,
                     session_key: str | None = None, files: FileOutbox | None = None,
                     approver: Approver | None = None, chat_type: str | None = None,
                     cron: CronPort | None = None) -> ToolContext:
        return ToolContext(session_id=session_id, platform=platform, home=self.home, store=self.store,
                           user_id=user_id, session_key=session_key,
                           recall_all=self.settings.recalls_everything(platform, user_id),
                           toolsets=self.tools_for(platform, chat_type).toolsets,
                           env_names=self.settings.env_names, files=files, file_roots=file_roots(self.home),
                           approver=approver, chat_type=chat_type, cron=cron)

    def skill_needs(self, platform: str) -> SkillNeeds:
        """What this platform's agent has, for the skills that require toolsets or variables."""
        return SkillNeeds(self.tools_for(platform).toolsets, self.settings.env_names)

    async def build_prompt(self, platform: str, chat_type: str, *, shared: bool = False,
                           user_name: str | None = None) -> str:
        # Reading memory files and walking skills/** (YAML included) is disk work: off the event loop.
        memory, user, skills = await asyncio.to_thread(_snapshot_sections, self.home, self.skill_needs(platform))
        ctx = PromptContext(platform, chat_type, shared, user_name, memory=memory, user_profile=user,
                            skills=tuple(skills), tool_names=frozenset(self.tools_for(platform, chat_type).names))
        return build_system_prompt(ctx)

    # ------------------------------------------------------------ side loops

    async def _side_loop(self, session_id: str, platform: str, system: str, conversation: list[dict[str, Any]],
                         prompt: str, tools: ToolRegistry, max_iterations: int,
                         session_key: str | None = None) -> set[str]:
        """A loop whose messages are not part of the transcript (flush, review); returns the tools it used."""
        messages = [*conversation, {"role": "user", "content": prompt}]
        repair_history(messages)
        loop = ToolLoop(self.store, self.client, tools, self.tool_context(session_id, platform, session_key=session_key),
                        max_iterations=max_iterations, persist=False)
        result = await loop.run(system, messages)
        return result.used_tools

    async def memory_flush(self, session_id: str, *, platform: str | None = None,
                           messages: Sequence[dict[str, Any]] | None = None, skills: bool = False) -> bool:
        """One chance for the model to save memories from a session about to end or be compressed;
        with ``skills`` (before an automatic reset, as the reference has it) skills too.
        True when it saved something.

        The model sees the latest of ``messages`` (default: the whole history)
        that fit in half the compression threshold: the flush runs exactly when
        the history may no longer fit, and a request that overflows saves nothing.
        """
        if not self.client.settings.configured:
            return False
        session, history = await self.store.load_conversation(session_id)
        if session is None:
            return False
        platform = platform or str(session.get("source") or "unknown")
        tools = self.tools_for(platform).only(REVIEW_TOOLS if skills else [MEMORY_TOOL])
        if MEMORY_TOOL not in tools and SKILL_TOOL not in tools:
            return False
        prompt = RESET_FLUSH_PROMPT if skills else FLUSH_PROMPT
        # Looking up a skill before patching it takes a call or two more than saving a memory.
        iterations = max(FLUSH_MAX_ITERATIONS, self.settings.review_max_iterations) if skills else FLUSH_MAX_ITERATIONS
        system = str(session.get("system_prompt") or await self.build_prompt(platform, "dm"))
        fixed = estimate_tokens([{"role": "system", "content": system}, {"role": "user", "content": prompt}])
        source = list(messages) if messages is not None else history
        window = recent_window(source, self.settings.compression_at // 2 - fixed)
        if not window:
            log.info("agent.memory_flush_skipped", session_id=session_id, messages=len(source))
            return False
        used = await self._side_loop(session_id, platform, system, window, prompt, tools, iterations)
        saved = bool(used & {MEMORY_TOOL, SKILL_TOOL})
        log.info("agent.memory_flush", session_id=session_id, saved=saved, skills=skills,
                 shown=len(window), of=len(source))
        return saved

    async def side_answer(self, session_id: str, platform: str, chat_type: str, question: str, *,
                          model: str | None = None) -> str:
        """/btw: an answer to ``question`` on a snapshot of the session, stored nowhere (the call's
        tokens still count in the session's usage). No tools: a side question changes nothing."""
        session, history = await self.store.load_conversation(session_id)
        if session is None:
            raise SessionNotFoundError(f"No session with id {session_id}.")
        system = str(session.get("system_prompt") or await self.build_prompt(platform, chat_type)) + BTW_NOTE
        fixed = estimate_tokens([{"role": "system", "content": system}, {"role": "user", "content": question}])
        messages = [*recent_window(history, self.settings.compression_at - fixed), {"role": "user", "content": question}]
        repair_history(messages)
        loop = ToolLoop(self.store, self.client, ToolRegistry(), self.tool_context(session_id, platform),
                        max_iterations=1, persist=False, model=model)
        return (await loop.run(system, messages)).text

    async def review(self, session_id: str, platform: str, session_key: str, system: str,
                     snapshot: Sequence[dict[str, Any]], *, memory: bool, skills: bool) -> set[str]:
        """The background review of the learning loop: a fresh agent, no nudges of its own."""
        tools = self.tools_for(platform).only(REVIEW_TOOLS)
        if not len(tools):
            return set()
        used = await self._side_loop(session_id, platform, system, list(snapshot), review_prompt(memory, skills),
                                     tools, self.settings.review_max_iterations, session_key)
        log.info("agent.review_done", memory=memory, skills=skills, used=sorted(used))
        return used

    async def title(self, session_id: str, user_text: str, reply_text: str) -> None:
        title = await auto_title(self.store, self.client, session_id, user_text, reply_text, model=self.aux_model)
        if title:
            # A title is what the conversation is about: user content, only for debugging.
            log.info("agent.titled", session_id=session_id)
            log.debug("agent.title", session_id=session_id, title=title)

    # ------------------------------------------------------------ compression

    def needs_compression(self, system: str, conversation: Sequence[dict[str, Any]]) -> bool:
        tokens = estimate_tokens([{"role": "system", "content": system}, *conversation])
        return tokens >= self.settings.compression_at

    async def compress(self, session_key: str, session_id: str, *,
                       platform: str | None = None, chat_type: str | None = None) -> CompressOutcome:
        """Memory flush, summary of the middle, split into a child session; the key follows the new one."""
        session, history = await self.store.load_conversation(session_id)
        if session is None:
            return CompressOutcome("There is no session to compress.")
        if session.get("ended_at") is not None:
            return CompressOutcome("This session has already ended; there is nothing to compress.")
        repair_history(history)
        key_parts = session_key.split(":")
        platform = platform or str(session.get("source") or (key_parts[2] if len(key_parts) > 2 else "unknown"))
        chat_type = chat_type or (key_parts[3] if len(key_parts) > 3 else "dm")
        old_prompt = str(session.get("system_prompt") or "")
        # The new prompt is about the size of the old one; what it may keep is planned against it.
        keep = keep_budget(self.settings.compression_at, old_prompt)
        plan = plan_split(history, head_messages=self.settings.head_messages, tail_tokens=self.settings.tail_tokens,
                          keep_tokens=keep)
        if not plan.middle:
            return CompressOutcome("This session is still short; there is nothing to compress yet.")
        try:
            # What is about to leave the visible context is what the flush must look at.
            await self.memory_flush(session_id, platform=platform, messages=plan.middle)
        except Exception:  # saving memories is worth a try, never worth losing the compression
            log.exception("agent.memory_flush_failed", session_id=session_id)
        summary, usage = await summarise(self.client, plan.middle, model=self.aux_model)
        # The prompt is rebuilt now (fresh memory snapshot); who is talking is read off the old one.
        shared = "Several people share this conversation" in old_prompt
        prompt = await self.build_prompt(platform, chat_type, shared=shared)
        rebind = (self.rebind_op, session_key) if self.rebind_op is not None else None
        # A huge kept message (an answer cut at model.max_response_bytes) is not copied whole.
        op = split_session_op(session_id, plan, summary, prompt, session.get("title"),
                              usage=usage.session_columns(), rebind=rebind, max_chars=kept_message_chars(keep))
        try:
            split = await self._commit_split(op)
        except CompressionError:
            # The summary was paid for even though the session moved on under us.
            with contextlib.suppress(SessionNotFoundError):
                await self.store.record_usage(session_id, **usage.session_columns())
            raise
        log.info("agent.compressed", old_session_id=session_id, new_session_id=split.new_session_id,
                 summarised=split.summarised, kept=split.kept)
        log.debug("agent.compressed_title", new_session_id=split.new_session_id, title=split.title)
        named = f" as “{split.title}”" if split.title else ""
        return CompressOutcome(
            f"🗜️ Compressed: {split.summarised} earlier messages summarised, {split.kept} kept. "
            f"The conversation continues in session {split.new_session_id}{named}.",
            split,
        )

    async def _commit_split(self, op: Callable[[sqlite3.Connection], SplitResult]) -> SplitResult:
        """Submit the split and wait for its COMMIT, even through a cancel.

        A queued write stands whether or not its caller waits; a /stop that
        returned before it committed would let the chat's next turn read the
        old session a moment before the split ends it.
        """
        fut = asyncio.ensure_future(self.store.write(op))
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await fut
            raise

    async def aclose(self, grace: float = 5.0) -> None:
        await self.background.aclose(grace)
