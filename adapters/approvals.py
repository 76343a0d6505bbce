"""An approval question as adapters show it: its text, its three answers, and how a press comes back.

The gateway asks (``Adapter.send_approval``) and settles (``Adapter.settle_approval``); an
adapter shows the three choices as buttons where its platform has them. A press comes back
to the gateway as an ordinary ``InboundMessage`` from the person who pressed, whose text is
the same command a person could type (``approval_command``), so that authorization, dedupe
and the ``/approve`` ``/deny`` commands are one path for buttons and typing alike. The adapter
acknowledges the press to its platform itself (``answerCallbackQuery``, an interaction
response, Slack's ack) before it dispatches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["APPROVAL_CHOICES", "ApprovalChoice", "ApprovalPrompt", "approval_command", "approval_data",
           "parse_approval_data"]

ApprovalChoice = Literal["approve", "always", "deny"]

#: (choice, button label), in the order buttons are shown
APPROVAL_CHOICES: tuple[tuple[ApprovalChoice, str], ...] = (
    ("approve", "✅ Approve"), ("always", "♾ Always"), ("deny", "⛔ Deny"),
)

_ID = re.compile(r"[A-Za-z0-9]{4,32}")
_DATA = re.compile(r"apv:(approve|always|deny):([A-Za-z0-9]{4,32})")


@dataclass(frozen=True)
class ApprovalPrompt:
    #: short and unguessable enough for a chat: [A-Za-z0-9]{4,32}
    approval_id: str
    #: the question, plain text (the action, why it is asked, who may answer, until when)
    text: str
    #: the buttons, in order (a yes/no question shows two: /forget-me's confirmation)
    choices: tuple[tuple[ApprovalChoice, str], ...] = APPROVAL_CHOICES

    def __post_init__(self) -> None:
        if not _ID.fullmatch(self.approval_id):
            raise ValueError("an approval id is 4 to 32 letters and digits")

    def typed(self) -> str:
        """The question with the commands to type, for a surface without buttons."""
        return (f"{self.text}\n\nReply /approve {self.approval_id}, /approve always {self.approval_id} "
                f"or /deny {self.approval_id}.")


def approval_command(approval_id: str, choice: ApprovalChoice) -> str:
    """The text a press of ``choice`` becomes (what a person could type for the same answer)."""
    if choice == "approve":
        return f"/approve {approval_id}"
    if choice == "always":
        return f"/approve always {approval_id}"
    return f"/deny {approval_id}"


def approval_data(approval_id: str, choice: ApprovalChoice) -> str:
    """A button's payload (Telegram callback_data ≤ 64 bytes, Discord custom_id ≤ 100, Slack value)."""
    return f"apv:{choice}:{approval_id}"


def parse_approval_data(data: str) -> tuple[str, ApprovalChoice] | None:
    """(approval id, choice) from a button's payload; None for anything else (ignore it)."""
    match = _DATA.fullmatch(data or "")
    if match is None:
        return None
    choice: ApprovalChoice = match.group(1)  # type: ignore[assignment]
    return match.group(2), choice
