"""``Approvals`` and ``TurnApprover`` on their own: ids, who may answer, twice, too late, "always",
the policy, and a turn cancelled while its question waits (a recording adapter stands in for a
platform; the whole daemon with Telegram's buttons is in tests/adapters/telegram/test_approvals_e2e.py)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from adapters.approvals import ApprovalPrompt
from adapters.base import Adapter, ChatType, InboundMessage, OutboundMessage, SendResult
from core.tools import ApprovalRequest
from gateway.config.tools import ToolsConfig
from gateway.routing.approvals import Approvals, TurnApprover, new_approval_id, shown_action

REQUEST = ApprovalRequest(tool="terminal", action="rm -rf /tmp/x", reason="recursive delete", pattern="rm -rf *")


def _open(approvals: Approvals, *, asker: str = "1", timeout: float = 30.0, chat: str = "c1"):  # type: ignore[no-untyped-def]
    return approvals.open(REQUEST, session_id="s1", session_key="k1", platform="telegram", chat_id=chat,
                          thread_id=None, asker_id=asker, asker_name="Alice", timeout=timeout)


def test_ids_are_eight_letters_and_digits_and_differ() -> None:
    ids = {new_approval_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9]{8}", i) for i in ids)


async def test_the_asker_answers_once_and_a_second_answer_hears_it_was_answered() -> None:
    approvals = Approvals()
    pending = _open(approvals)
    assert approvals.get(pending.id) is pending and approvals.count == 1
    first = approvals.answer(pending.id, "approve", platform="telegram", user_id="1", user_name="Alice")
    assert first.status == "answered" and first.outcome == "✅ Approved by Alice"
    again = approvals.answer(pending.id, "deny", platform="telegram", user_id="1", user_name="Alice")
    assert again.status == "settled" and again.outcome == "✅ Approved by Alice"
    answer = await approvals.wait(pending)
    assert answer is not None and answer.choice == "approve"
    approvals.close(pending, "✅ Approved by Alice")
    late = approvals.answer(pending.id, "deny", platform="telegram", user_id="1", user_name="Alice")
    assert (late.status, late.outcome, approvals.count) == ("settled", "✅ Approved by Alice", 0)


async def test_someone_else_is_refused_and_the_question_keeps_waiting() -> None:
    approvals = Approvals()
    pending = _open(approvals)
    other = approvals.answer(pending.id, "approve", platform="telegram", user_id="2", user_name="Bob")
    assert other.status == "not_allowed" and not pending.future.done()
    # The same user id on another platform is another person.
    elsewhere = approvals.answer(pending.id, "approve", platform="discord", user_id="1", user_name="Alice")
    assert elsewhere.status == "not_allowed"
    assert approvals.answer(pending.id, "deny", platform="telegram", user_id="1", user_name=None).status == "answered"


@pytest.mark.parametrize("entry", ["2", "telegram:2"])
async def test_an_approver_from_config_may_answer(entry: str) -> None:
    approvals = Approvals(approvers=[entry])
    pending = _open(approvals)
    assert approvals.answer(pending.id, "approve", platform="telegram", user_id="2", user_name="Bob").status == "answered"
    assert not Approvals(approvers=["discord:2"]).may_answer(pending, "telegram", "2")


async def test_no_answer_by_the_deadline_is_none_and_a_late_one_hears_it_expired() -> None:
    approvals = Approvals()
    pending = _open(approvals, timeout=0.05)
    assert await approvals.wait(pending) is None
    late = approvals.answer(pending.id, "approve", platform="telegram", user_id="1", user_name="Alice")
    assert late.status == "settled" and late.outcome is not None and late.outcome.startswith("⌛")
    approvals.close(pending, "⌛ No answer within 0.05 s: denied")
    assert approvals.answer(pending.id, "approve", platform="telegram", user_id="1", user_name="Alice").outcome \
        == "⌛ No answer within 0.05 s: denied"


async def test_unknown_ids_and_the_chat_lookup() -> None:
    approvals = Approvals()
    assert approvals.answer("nope1234", "approve", platform="telegram", user_id="1", user_name=None).status == "unknown"
    a, b = _open(approvals), _open(approvals)
    _open(approvals, chat="c2")
    assert [p.id for p in approvals.in_chat("telegram", "c1", None)] == [a.id, b.id]
    assert approvals.in_chat("telegram", "c1", "topic") == []


def test_the_action_is_shown_verbatim_and_cut_sensibly() -> None:
    assert shown_action("echo `date` *now*\x07") == "echo `date` *now*"
    cut = shown_action("x" * 1000 + "; rm -rf ~", 100)
    assert cut.startswith("x" * 50) and "… (910 characters left out) …" in cut
    assert cut.endswith("; rm -rf ~")  # the end of a long command is never hidden


class _Recording(Adapter):
    platform = "telegram"

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[tuple[OutboundMessage, ApprovalPrompt]] = []
        self.settled: list[tuple[str, str]] = []
        self.shown = asyncio.Event()

    async def connect(self) -> None: ...

    async def disconnect(self) -> None: ...

    async def send(self, message: OutboundMessage) -> SendResult:
        return SendResult(("m",))

    async def send_approval(self, target: OutboundMessage, prompt: ApprovalPrompt) -> str | None:
        self.prompts.append((target, prompt))
        self.shown.set()
        return "77"

    async def settle_approval(self, target: OutboundMessage, message_id: str, outcome: str) -> None:
        self.settled.append((message_id, outcome))


def _approver(pending: Approvals, adapter: Adapter, **tools: object) -> TurnApprover:
    msg = InboundMessage("telegram", "c1", ChatType.DM, "1", "do it", message_id="5", user_name="Alice")
    return TurnApprover(pending, adapter, msg, "k1", "s1", ToolsConfig.model_validate(tools))


async def test_policy_off_and_deny_never_ask() -> None:
    adapter = _Recording()
    off = await _approver(Approvals(), adapter, approvals="off").decide(REQUEST)
    deny = await _approver(Approvals(), adapter, approvals="deny").decide(REQUEST)
    assert off.approved and not deny.approved and adapter.prompts == []


async def test_always_is_remembered_for_the_session_and_the_prompt_is_settled() -> None:
    approvals, adapter = Approvals(), _Recording()
    approver = _approver(approvals, adapter)
    decision = asyncio.ensure_future(approver.decide(REQUEST))
    await asyncio.wait_for(adapter.shown.wait(), 5)
    target, prompt = adapter.prompts[0]
    assert (target.chat_id, target.reply_to) == ("c1", "5")
    assert "rm -rf /tmp/x" in prompt.text and "recursive delete" in prompt.text and "Alice" in prompt.text
    approvals.answer(prompt.approval_id, "always", platform="telegram", user_id="1", user_name="Alice")
    assert (await decision).approved
    assert adapter.settled[0][0] == "77" and "♾ Approved by Alice" in adapter.settled[0][1]
    again = await approver.decide(REQUEST)
    assert again.approved and len(adapter.prompts) == 1  # not asked again
    other = await asyncio.wait_for(_approver(approvals, adapter, approval_timeout=0.05).decide(
        ApprovalRequest("terminal", "rm -rf /", "recursive delete", "rm -rf /")), 5)
    assert not other.approved and "no answer" in other.why  # another pattern is asked (and times out)


async def test_a_stopped_turn_cancels_its_question() -> None:
    approvals, adapter = Approvals(), _Recording()
    decision = asyncio.ensure_future(_approver(approvals, adapter).decide(REQUEST))
    await asyncio.wait_for(adapter.shown.wait(), 5)
    decision.cancel()
    with pytest.raises(asyncio.CancelledError):
        await decision
    approval_id = adapter.prompts[0][1].approval_id
    assert "⏹ Cancelled" in adapter.settled[0][1] and approvals.count == 0
    late = approvals.answer(approval_id, "approve", platform="telegram", user_id="1", user_name=None)
    assert late.status == "settled" and late.outcome is not None and late.outcome.startswith("⏹")


async def test_always_is_kept_in_state_db_across_a_restart(db_path: Path) -> None:
    from storage import StateStore, WriterSettings

    async with StateStore(db_path, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        first = Approvals(store=store)
        assert not await first.remembered("s1", REQUEST.pattern)
        await first.remember("s1", REQUEST, "1")
        await first.remember("s1", REQUEST, "2")  # once is enough; the first stands
    async with StateStore(db_path, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        again = Approvals(store=store)  # a new daemon run
        assert await again.remembered("s1", REQUEST.pattern)
        assert not await again.remembered("s1", "rm -rf /") and not await again.remembered("s2", REQUEST.pattern)
        rows = await store.read(lambda c: c.execute(
            "SELECT session_id, pattern, tool, approved_by FROM gateway_approvals_always").fetchall())
        assert [tuple(r) for r in rows] == [("s1", REQUEST.pattern, "terminal", "1")]


async def test_a_stop_of_the_gateway_ends_the_question_as_a_no_and_asks_no_new_one() -> None:
    approvals, adapter = Approvals(), _Recording()
    decision = asyncio.ensure_future(_approver(approvals, adapter).decide(REQUEST))
    await asyncio.wait_for(adapter.shown.wait(), 5)
    approvals.stop()
    ended = await asyncio.wait_for(decision, 5)
    assert not ended.approved and "restarting" in ended.why
    assert "⏹ Cancelled (the gateway is restarting)" in adapter.settled[0][1] and approvals.count == 0
    late = approvals.answer(adapter.prompts[0][1].approval_id, "approve", platform="telegram", user_id="1",
                            user_name="Alice")
    assert late.status == "settled" and late.outcome == "⏹ Cancelled (the gateway is restarting)"
    again = await asyncio.wait_for(_approver(approvals, adapter).decide(REQUEST), 5)
    assert not again.approved and "restarting" in again.why and len(adapter.prompts) == 1
