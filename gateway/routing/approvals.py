"""Approvals: a tool's dangerous action waits for a yes from the person whose message started the turn.

``Approvals`` (one per daemon, on ``Services``) holds the questions waiting for an answer, by id,
and what each ended as (so a second press, or one after the timeout, hears why nothing happens).
``TurnApprover`` is core's ``Approver`` for one turn: it applies ``tools.approvals``, asks in the
chat (``Adapter.send_approval``: buttons where the platform has them, the commands to type
elsewhere), waits for ``/approve`` ``/deny`` (typed, or a button press the adapter turned into the
same command, ``gateway.commands.approvals``) until ``tools.approval_timeout`` (no answer is a no),
and shows the outcome in place of the question (``Adapter.settle_approval``).

"Always" is remembered per session id, in state.db (``storage.approvals``, through the writer), so a
restart keeps it; a new session (/new, a reset) asks again. Without a store (tests) it is kept in
memory only.

A pending question is not persisted: it belongs to a running turn, and a restart ends that turn,
so its question is gone with it (a late press hears "no approval ... is waiting"). Once the gateway
stops (``Approvals.stop``, as intake closes) nobody can answer any more: every question waiting ends
at once as a no, and no new one is asked, so the drain never waits on a person.
"""

from __future__ import annotations

import asyncio
import secrets
import string
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

import structlog

from adapters.approvals import ApprovalChoice, ApprovalPrompt
from adapters.base import Adapter, InboundMessage, OutboundMessage, SendKind
from core.tools import ApprovalDecision, ApprovalRequest
from gateway.config.tools import ToolsConfig
from gateway.routing.owners import Owners
from storage import Store
from storage import approvals as always_rows

__all__ = ["ApprovalAnswer", "Approvals", "PendingApproval", "Resolution", "TurnApprover", "new_approval_id"]

log = structlog.get_logger("hermes.approvals")

_ALPHABET = string.ascii_letters + string.digits
ID_LENGTH = 8
#: how many ended questions are remembered for "already answered" (older ids are "unknown")
_SETTLED_KEPT = 2000
#: sessions whose "always" patterns are cached (state.db has them all)
_SESSIONS_CACHED = 2000
#: the action is shown verbatim up to this many characters (a long heredoc would bury the question)
_ACTION_SHOWN = 700
#: the settled message repeats the action this short (it only reminds of what was asked)
_ACTION_SETTLED = 200

CANCELLED = "⏹ Cancelled (the turn was stopped)"
STOPPING = "⏹ Cancelled (the gateway is restarting)"


def new_approval_id() -> str:
    """8 letters and digits from ``secrets``: short enough to type, too many to guess (62^8)."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(ID_LENGTH))


@dataclass(frozen=True)
class ApprovalAnswer:
    choice: ApprovalChoice
    user_id: str | None
    user_name: str | None

    @property
    def who(self) -> str:
        return self.user_name or self.user_id or "someone"


#: the "answer" of a question the gateway's stop ended (``Approvals.stop``): a no, from nobody
_STOPPED = ApprovalAnswer("deny", None, None)


@dataclass
class PendingApproval:
    """One question waiting for its answer."""

    id: str
    request: ApprovalRequest
    session_id: str
    session_key: str
    platform: str
    chat_id: str
    thread_id: str | None
    #: the person whose message started the turn (platform user id and name)
    asker_id: str | None
    asker_name: str | None
    #: seconds the question waits, and when it stops (the event loop's clock)
    timeout: float
    deadline: float
    future: asyncio.Future[ApprovalAnswer]
    #: the platform message that shows the question (None until shown, or where it has none)
    message_id: str | None = None

    @property
    def asker(self) -> str:
        return self.asker_name or self.asker_id or "the person who asked"


@dataclass(frozen=True)
class Resolution:
    """What became of an answer: taken, refused (someone else's question), or too late / unknown."""

    status: Literal["answered", "not_allowed", "settled", "unknown"]
    pending: PendingApproval | None = None
    #: how the question ended, for "settled" (and "answered": the outcome just given)
    outcome: str | None = None


def timeout_outcome(timeout: float) -> str:
    return f"⌛ No answer within {timeout:g} s: denied"


def answer_outcome(answer: ApprovalAnswer) -> str:
    if answer is _STOPPED:
        return STOPPING
    if answer.choice == "approve":
        return f"✅ Approved by {answer.who}"
    if answer.choice == "always":
        return f"♾ Approved by {answer.who}, and from now on in this session without asking"
    return f"⛔ Denied by {answer.who}"


def shown_action(action: str, limit: int = _ACTION_SHOWN) -> str:
    """The action as the person reads it: verbatim (no markup: a chat would eat backticks and
    asterisks), control characters but line breaks dropped. Past ``limit`` its head and its tail
    are shown around a count of what is left out: the end of a long command is where a harmful
    part would hide from someone reading only its beginning."""
    clean = "".join(ch for ch in action if ch in "\n\t" or ch.isprintable()).strip()
    if len(clean) <= limit:
        return clean
    half = limit // 2
    return f"{clean[:half].rstrip()} … ({len(clean) - 2 * half} characters left out) … {clean[-half:].lstrip()}"


class Approvals:
    """The daemon's pending approvals, by id; and the "always" answers of each session."""

    def __init__(self, *, approvers: Iterable[str] = (), store: Store | None = None,
                 owners: Owners | None = None) -> None:
        """``approvers``: ``tools.approvers``, user ids ("123") or platform-qualified ones ("telegram:123")
        who may answer any question besides its asker; the gateway's ``owners`` may too.
        ``store``: where "always" is kept (None: memory)."""
        self._approvers = frozenset(a.strip() for a in approvers if a.strip())
        self._owners = owners
        self._store = store
        self._pending: dict[str, PendingApproval] = {}
        self._settled: OrderedDict[str, str] = OrderedDict()
        #: session id -> its "always" patterns (with a store: a cache of the sessions read lately)
        self._always: OrderedDict[str, set[str]] = OrderedDict()
        #: the gateway stops: questions waiting were ended, new ones are not asked
        self.stopping = False

    @property
    def count(self) -> int:
        """Questions waiting now (for /status and ``status``)."""
        return len(self._pending)

    @property
    def has_approvers(self) -> bool:
        return bool(self._approvers)

    def others(self, platform: str) -> str:
        """Who besides the asker may answer on ``platform``, as a parenthesis ("" for nobody)."""
        owner = self._owners is not None and self._owners.has_any(platform)
        if owner and self._approvers:
            return " (or an owner, or an approver from tools.approvers)"
        if owner:
            return " (or an owner)"
        return " (or an approver from tools.approvers)" if self._approvers else ""

    def open(self, request: ApprovalRequest, *, session_id: str, session_key: str, platform: str, chat_id: str,
             thread_id: str | None, asker_id: str | None, asker_name: str | None, timeout: float) -> PendingApproval:
        loop = asyncio.get_running_loop()
        approval_id = new_approval_id()
        while approval_id in self._pending or approval_id in self._settled:
            approval_id = new_approval_id()
        pending = PendingApproval(approval_id, request, session_id, session_key, platform, chat_id, thread_id,
                                  asker_id, asker_name, timeout, loop.time() + timeout, loop.create_future())
        self._pending[approval_id] = pending
        return pending

    def stop(self) -> None:
        """The gateway stops and takes no answer any more: every question waiting ends now, as a no
        (its turn settles it: ``STOPPING``), and ``TurnApprover`` asks no new one."""
        self.stopping = True
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_result(_STOPPED)

    def get(self, approval_id: str) -> PendingApproval | None:
        return self._pending.get(approval_id)

    def in_chat(self, platform: str, chat_id: str, thread_id: str | None) -> list[PendingApproval]:
        """The questions waiting in one chat (its thread), oldest first."""
        return [p for p in self._pending.values()
                if (p.platform, p.chat_id, p.thread_id) == (platform, chat_id, thread_id) and not p.future.done()]

    def in_threads(self, platform: str, chat_id: str) -> list[PendingApproval]:
        """The questions waiting in one chat's threads (not at its top level), oldest first."""
        return [p for p in self._pending.values() if (p.platform, p.chat_id) == (platform, chat_id)
                and p.thread_id is not None and not p.future.done()]

    def may_answer(self, pending: PendingApproval, platform: str, user_id: str | None) -> bool:
        if user_id is None:
            return False
        if platform == pending.platform and user_id == pending.asker_id:
            return True
        if self._owners is not None and self._owners.is_owner(platform, user_id):
            return True
        return user_id in self._approvers or f"{platform}:{user_id}" in self._approvers

    def answer(self, approval_id: str, choice: ApprovalChoice, *, platform: str, user_id: str | None,
               user_name: str | None) -> Resolution:
        """Take one person's answer. Never raises: every outcome is a ``Resolution`` to reply with."""
        pending = self._pending.get(approval_id)
        if pending is None:
            ended = self._settled.get(approval_id)
            return Resolution("settled", outcome=ended) if ended is not None else Resolution("unknown")
        if pending.future.done():  # answered a moment ago (or ended by a stop); its turn has not closed it yet
            return Resolution("settled", pending, answer_outcome(pending.future.result()))
        if not self.may_answer(pending, platform, user_id):
            return Resolution("not_allowed", pending)
        if asyncio.get_running_loop().time() >= pending.deadline:
            # The waiter wakes any moment and denies it: the answer came too late to count.
            return Resolution("settled", pending, timeout_outcome(pending.timeout))
        answer = ApprovalAnswer(choice, user_id, user_name)
        pending.future.set_result(answer)
        return Resolution("answered", pending, answer_outcome(answer))

    async def wait(self, pending: PendingApproval) -> ApprovalAnswer | None:
        """The answer, or None once the deadline passed without one. Cancelling the caller leaves
        the question open (``close`` it)."""
        left = pending.deadline - asyncio.get_running_loop().time()
        if left > 0 and not pending.future.done():
            await asyncio.wait({pending.future}, timeout=left)
        # No await between this check and the caller's ``close``: an answer either counted or did not.
        return pending.future.result() if pending.future.done() else None

    def close(self, pending: PendingApproval, outcome: str) -> None:
        """The question ended as ``outcome``; later answers hear it."""
        self._pending.pop(pending.id, None)
        if not pending.future.done():
            pending.future.cancel()
        self._settled[pending.id] = outcome
        self._settled.move_to_end(pending.id)
        while len(self._settled) > _SETTLED_KEPT:
            self._settled.popitem(last=False)

    async def remember(self, session_id: str, request: ApprovalRequest, approved_by: str | None) -> None:
        """"Always": this exact pattern is not asked again in this session. A failed write leaves it
        remembered until the daemon stops (the answer was given; only its keeping failed)."""
        (await self._patterns(session_id)).add(request.pattern)
        if self._store is None:
            return
        try:
            await self._store.write(lambda c: always_rows.remember(
                c, session_id, request.pattern, tool=request.tool, approved_by=approved_by, now=time.time()))
        except Exception as exc:
            log.warning("approval.always_not_stored", error_type=type(exc).__name__, error=str(exc)[:200])

    async def remembered(self, session_id: str, pattern: str) -> bool:
        return pattern in await self._patterns(session_id)

    async def _patterns(self, session_id: str) -> set[str]:
        found = self._always.get(session_id)
        if found is None:
            found = set()
            if self._store is not None:
                try:
                    found = await self._store.read(lambda c: always_rows.patterns(c, session_id))
                except Exception as exc:  # asked again, which is the safe side
                    log.warning("approval.always_unreadable", error_type=type(exc).__name__, error=str(exc)[:200])
            found = self._always.setdefault(session_id, found)
            if self._store is not None:
                while len(self._always) > _SESSIONS_CACHED:
                    self._always.popitem(last=False)
        self._always.move_to_end(session_id)
        return found


class TurnApprover:
    """core's ``Approver`` for one turn: asks the person whose message started it, in its chat."""

    def __init__(self, approvals: Approvals, adapter: Adapter | None, msg: InboundMessage, session_key: str,
                 session_id: str, tools: ToolsConfig) -> None:
        self._approvals = approvals
        self._adapter = adapter
        self._msg = msg
        self._key = session_key
        self._session_id = session_id
        self._tools = tools

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        policy = self._tools.approvals
        if policy == "off":
            log.warning("approval.unasked", tool=request.tool, reason=request.reason)
            return ApprovalDecision(True, "approvals are off (tools.approvals: off)")
        if policy == "deny":
            log.info("approval.refused_by_policy", tool=request.tool, reason=request.reason)
            return ApprovalDecision(False, "dangerous actions are refused here (tools.approvals: deny)")
        if await self._approvals.remembered(self._session_id, request.pattern):
            log.info("approval.remembered", tool=request.tool)
            return ApprovalDecision(True, "approved before with \"always\" in this session")
        if self._adapter is None:
            return ApprovalDecision(False, "nobody can be asked on this platform")
        if self._approvals.stopping:
            log.info("approval.refused_stopping", tool=request.tool)
            return ApprovalDecision(False, "the gateway is restarting: nobody can answer now")
        return await self._ask(self._adapter, request)

    async def _ask(self, adapter: Adapter, request: ApprovalRequest) -> ApprovalDecision:
        msg = self._msg
        timeout = self._tools.approval_timeout
        pending = self._approvals.open(request, session_id=self._session_id, session_key=self._key,
                                       platform=msg.platform, chat_id=msg.chat_id, thread_id=msg.thread_id,
                                       asker_id=msg.user_id, asker_name=msg.user_name, timeout=timeout)
        # An interim message (ACK): a surface that waits for one final answer (a terminal, the API)
        # must not take the question for it.
        target = OutboundMessage(msg.platform, msg.chat_id, "", msg.thread_id, msg.message_id, SendKind.ACK)
        with structlog.contextvars.bound_contextvars(approval_id=pending.id, tool=request.tool):
            log.info("approval.asked", reason=request.reason, timeout_s=timeout)
            try:
                pending.message_id = await adapter.send_approval(target, ApprovalPrompt(pending.id, self._text(pending)))
                answer = await self._approvals.wait(pending)
            except asyncio.CancelledError:  # /stop (or the gateway stopping) while the question waited
                self._approvals.close(pending, CANCELLED)
                await asyncio.shield(self._settle(adapter, target, pending, CANCELLED))
                log.info("approval.cancelled")
                raise
            except Exception as exc:  # the question could not be shown: nobody can say yes
                self._approvals.close(pending, "⚠️ The question could not be shown")
                log.warning("approval.not_shown", error_type=type(exc).__name__, error=str(exc)[:200])
                return ApprovalDecision(False, "the question could not be shown in the chat")
            if answer is None:
                outcome = timeout_outcome(timeout)
                decision = ApprovalDecision(False, f"no answer within {timeout:g} s")
            elif answer is _STOPPED:
                outcome = STOPPING
                decision = ApprovalDecision(False, "the gateway is restarting: nobody can answer now")
            else:
                outcome = answer_outcome(answer)
                approved = answer.choice != "deny"
                verb = "approved" if approved else "denied"
                decision = ApprovalDecision(approved, f"{verb} by {answer.user_id or 'someone'}")
            # Closed before anything else is awaited: a /stop from here on finds nothing left open.
            self._approvals.close(pending, outcome)
            if answer is not None and answer.choice == "always":
                await self._approvals.remember(self._session_id, request, answer.user_id)
            log.info("approval.settled", approved=decision.approved, why=decision.why)
            await self._settle(adapter, target, pending, outcome)
            return decision

    def _text(self, pending: PendingApproval) -> str:
        request = pending.request
        who = pending.asker + self._approvals.others(pending.platform)
        return (f"🔐 Approval needed: {request.tool} wants to do this:\n\n{shown_action(request.action)}\n\n"
                f"Why: {shown_action(request.reason, _ACTION_SETTLED)}\nWho can answer: {who}\n"
                f"No answer within {pending.timeout:g} s means no.")

    async def _settle(self, adapter: Adapter, target: OutboundMessage, pending: PendingApproval,
                      outcome: str) -> None:
        if pending.message_id is None:
            return
        text = f"🔐 {pending.request.tool}: {shown_action(pending.request.action, _ACTION_SETTLED)}\n\n{outcome}"
        try:
            await adapter.settle_approval(replace(target, text=text), pending.message_id, text)
        except Exception as exc:  # the outcome still counts; only its display is stale
            log.warning("approval.settle_failed", error_type=type(exc).__name__, error=str(exc)[:200])
