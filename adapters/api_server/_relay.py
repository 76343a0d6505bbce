"""A request without a stream whose turn asked for an approval was answered by the question itself;
the turn's own answer then goes to the request that answers the question (``/approve <id>``,
``/deny <id>``, or without an id the one question of that ``user``), after the command's reply.

Only a request of the same ``user`` (the same chat) takes it: anyone else's answer is refused by
the gateway, and must not carry this user's answer either. An answer that comes while no such
request waits (the question timed out, and the turn went on) is kept for the next one.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from ..base import InboundMessage, OutboundMessage

__all__ = ["ApprovalRelay"]

#: questions (and answers) remembered at most; older ones are answered in the session only
_KEPT = 500
_ANSWER = re.compile(r"/(?:approve|deny)(?:\s+always)?(?:\s+([A-Za-z0-9]{4,32}))?\s*", re.IGNORECASE)


class ApprovalRelay:
    def __init__(self) -> None:
        #: approval id -> (chat, the request the question answered)
        self._asked: OrderedDict[str, tuple[str, str]] = OrderedDict()
        #: the request a question answered -> its turn's answer, come while nobody waited for it
        self._late: OrderedDict[str, OutboundMessage] = OrderedDict()

    def asked(self, approval_id: str, chat_id: str, request_id: str) -> None:
        """The question ``approval_id`` answered request ``request_id`` of ``chat_id``."""
        self._asked[approval_id] = (chat_id, request_id)
        while len(self._asked) > _KEPT:
            self._asked.popitem(last=False)

    def claim(self, msg: InboundMessage) -> str | None:
        """The request whose turn's answer ``msg`` should carry (an answer to its question, from its
        chat), or None. Claimed once."""
        match = _ANSWER.fullmatch(msg.text.strip())
        if match is None:
            return None
        wanted = match.group(1)
        if wanted is None:
            mine = [a for a, (chat, _) in self._asked.items() if chat == msg.chat_id]
            if len(mine) != 1:
                return None
            wanted = mine[0]
        found = self._asked.get(wanted)
        if found is None or found[0] != msg.chat_id:
            return None
        del self._asked[wanted]
        return found[1]

    def waits_for(self, request_id: str) -> bool:
        """Whether ``request_id``'s answer is still owed to a later request."""
        return any(rid == request_id for _, rid in self._asked.values())

    def keep_late(self, message: OutboundMessage) -> None:
        if message.reply_to is None:
            return
        self._late[message.reply_to] = message
        while len(self._late) > _KEPT:
            self._late.popitem(last=False)

    def take_late(self, request_id: str) -> OutboundMessage | None:
        return self._late.pop(request_id, None)
