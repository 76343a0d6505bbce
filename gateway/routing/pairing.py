"""Pairing: a stranger's DM gets a short code; an owner approves it, and the stranger may talk.

Everything is scoped to the platform *and* the bot account (``Adapter.account_id``): a code, and
the approval it became, count only for the bot that gave the code. The limits: a code lives an
hour; a sender gets at most one new code per ten minutes; a bot account has at most three codes
waiting; five wrong approvals lock the codes they could have been meant for. The users let in are
rows of state.db (``storage.pairing``), kept in memory here so that the check on every message is
a lookup. Approvals come from an owner in a chat (``/pair``, this chat's platform and account
only) or from the command line (``hermes-gateway pairing``, any platform), where the first person
approved on a platform without an owner becomes its owner.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from adapters.base import InboundMessage
from gateway.routing.owners import Owners
from gateway.routing.pairing_codes import ALPHABET, CODE_LENGTH, CodeKey, new_code, read_code
from storage import Store, pairing

__all__ = ["CODE_TTL", "LOCK_AFTER", "MAX_PENDING", "PAIRING_KEY_FILE", "REQUEST_INTERVAL", "Pairing",
           "PairingOutcome"]

#: the key of the codes' hashes, beside state.db in the home (never inside it)
PAIRING_KEY_FILE = "pairing.key"

CODE_TTL = 3600.0
REQUEST_INTERVAL = 600.0
MAX_PENDING = 3
LOCK_AFTER = 5
#: settled and expired codes are still recognised (to say so) for this long, then swept
_KEPT = 86_400.0

_STATUS_TOLD = {
    "approved": "That code was already approved.",
    "denied": "That code was already refused.",
    "replaced": "That code was replaced by a newer one: ask the person for the code of their last message.",
    "locked": (f"That code is locked after {LOCK_AFTER} wrong approvals. The person gets a new code by "
               f"writing again (at most one every {int(REQUEST_INTERVAL // 60)} minutes)."),
}


@dataclass(frozen=True)
class PairingOutcome:
    """What became of an approve / deny: ``ok``, and what the person who asked is told."""

    ok: bool
    message: str
    #: the code's row (approved or refused: whose code it was, where their DM is)
    code: pairing.PairingCode | None = None
    #: the approved person became the platform's first owner
    became_owner: bool = False


class Pairing:
    def __init__(self, store: Store, owners: Owners, key_path: Path, *,
                 accounts: Callable[[str], str | None] = lambda platform: None,
                 clock: Callable[[], float] = time.time, key: bytes | None = None) -> None:
        """``accounts``: the bot account each platform runs as now (None: not connected, or no
        daemon: the command line then approves a code for the account that gave it). ``key``:
        the codes' key from the configuration (``LoadedConfig.pairing_key``), else ``key_path``'s."""
        self._store = store
        self._owners = owners
        self._key = CodeKey(key_path, key)
        self._accounts = accounts
        self._clock = clock
        #: (platform, account) -> user ids let in by pairing
        self._allowed: dict[tuple[str, str], set[str]] = {}
        #: (platform, account, user) -> when they were last told "too many waiting" (once per interval)
        self._told_full: dict[tuple[str, str, str], float] = {}

    async def load(self) -> None:
        """The users let in and the owners recorded, from state.db (at start)."""
        users, owners = await self._store.read(lambda c: (pairing.allowed(c), pairing.owners(c)))
        self._allowed.clear()
        for user in users:
            self._allowed.setdefault((user.platform, user.account_id), set()).add(user.user_id)
        for owner in owners:
            self._owners.add(owner.platform, owner.user_id, owner.account_id)

    # ------------------------------------------------------------- checks

    def account(self, platform: str) -> str | None:
        return self._accounts(platform)

    def is_allowed(self, platform: str, user_id: str | None) -> bool:
        account = self._accounts(platform)
        return bool(user_id) and account is not None and user_id in self._allowed.get((platform, account), ())

    def has_allowed(self, platform: str) -> bool:
        """Anyone let in by pairing on the bot account ``platform`` runs as now."""
        account = self._accounts(platform)
        return account is not None and bool(self._allowed.get((platform, account)))

    # ------------------------------------------------------------ strangers

    async def request(self, msg: InboundMessage) -> tuple[str | None, str]:
        """A stranger's DM: (the reply, None for none; why, for the refusal's log line)."""
        account = self._accounts(msg.platform)
        if account is None or not msg.user_id:
            return None, "unknown sender or bot account"
        user_id, now = msg.user_id, self._clock()
        code = new_code()
        code_hash = self._key.hash(code)

        def op(conn: sqlite3.Connection) -> str:
            last = pairing.latest_request(conn, msg.platform, account, user_id)
            if last is not None and now - last < REQUEST_INTERVAL:
                return "recent"
            waiting = pairing.pending(conn, now=now, platform=msg.platform, account_id=account)
            if len([c for c in waiting if c.user_id != user_id]) >= MAX_PENDING:  # theirs is replaced
                return "full"
            pairing.sweep(conn, older_than=now - _KEPT)
            pairing.add_code(conn, platform=msg.platform, account_id=account, user_id=user_id,
                             user_name=msg.user_name, chat_id=msg.chat_id, code_hash=code_hash, now=now,
                             ttl=CODE_TTL)
            return "issued"

        result = await self._store.write(op)
        if result == "recent":
            return None, "pairing code already given lately"
        if result == "full":
            told = (msg.platform, account, user_id)
            if now - self._told_full.get(told, float("-inf")) < REQUEST_INTERVAL:
                return None, "pairing requests full (told already)"
            self._told_full = {k: t for k, t in self._told_full.items() if now - t < REQUEST_INTERVAL}
            self._told_full[told] = now
            return (f"I can't take more pairing requests right now ({MAX_PENDING} are waiting for the owner). "
                    "Please try again later."), "pairing requests full"
        minutes = int(CODE_TTL // 60)
        return (f"Hi! I don't know you yet. Your pairing code is {code}\n"
                f"Ask the owner of this bot to approve it (`/pair approve {code}` or "
                f"`hermes-gateway pairing approve {code}`). It is valid for {minutes} minutes."), "pairing code given"

    # --------------------------------------------------------------- owners

    async def approve(self, text: str, *, platform: str | None, by: str | None) -> PairingOutcome:
        """Approve the code in ``text``. ``platform``: asked in a chat there (only its own codes
        count); None: the command line (any platform's; the first approved becomes its owner)."""
        return await self._settle(text, platform=platform, by=by, approve=True)

    async def deny(self, text: str, *, platform: str | None, by: str | None) -> PairingOutcome:
        return await self._settle(text, platform=platform, by=by, approve=False)

    async def _settle(self, text: str, *, platform: str | None, by: str | None, approve: bool) -> PairingOutcome:
        code = read_code(text)
        if code is None:
            return PairingOutcome(False, f"That is not a pairing code: a code is {CODE_LENGTH} characters of "
                                         f"{ALPHABET} (for example /pair approve ABCD2345).")
        code_hash, now = self._key.hash(code), self._clock()
        scope_account = self._accounts(platform) if platform is not None else None
        accounts = self._accounts
        owners = self._owners  # its configured part is read-only: safe on the writer's thread

        def op(conn: sqlite3.Connection) -> PairingOutcome:
            row = pairing.code_by_hash(conn, code_hash)
            in_scope = [c.id for c in pairing.pending(conn, now=now, platform=platform, account_id=scope_account)]
            if row is None:
                _count_failure(conn, in_scope)
                return PairingOutcome(False, "No pairing code like that was given (check it for typos).")
            if platform is not None and row.platform != platform:
                _count_failure(conn, [*in_scope, row.id])
                return PairingOutcome(False, f"That code was given on {row.platform}, not here: approve it there, "
                                             "or with `hermes-gateway pairing approve`.")
            current = accounts(row.platform)
            if current is not None and row.account_id != current:
                _count_failure(conn, [*in_scope, row.id])
                return PairingOutcome(False, f"That code was given by another {row.platform} bot account than "
                                             "the one this gateway runs now; it lets nobody in here.")
            told = _STATUS_TOLD.get(row.status)
            if told is not None:
                return PairingOutcome(False, told, row)
            if row.expires_at <= now:
                return PairingOutcome(False, "That code has expired (codes are valid for "
                                             f"{int(CODE_TTL // 60)} minutes). The person gets a new one by "
                                             "writing again.", row)
            if not approve:
                pairing.settle(conn, row.id, "denied")
                return PairingOutcome(True, f"Refused {_who(row)} on {row.platform}.", row)
            pairing.settle(conn, row.id, "approved")
            pairing.allow(conn, platform=row.platform, account_id=row.account_id, user_id=row.user_id,
                          user_name=row.user_name, approved_by=by, now=now)
            first = (platform is None and not owners.configured_for(row.platform)
                     and not any(o.platform == row.platform and o.account_id == row.account_id
                                 for o in pairing.owners(conn)))
            if first:
                pairing.record_owner(conn, platform=row.platform, account_id=row.account_id, user_id=row.user_id,
                                     now=now)
            owner_note = f" {_who(row)} is now the owner of this bot on {row.platform}." if first else ""
            return PairingOutcome(True, f"Approved {_who(row)} on {row.platform}.{owner_note}", row, first)

        outcome = await self._store.write(op)
        if outcome.ok and approve and outcome.code is not None:
            row = outcome.code
            self._allowed.setdefault((row.platform, row.account_id), set()).add(row.user_id)
            if outcome.became_owner:
                self._owners.add(row.platform, row.user_id, row.account_id)
        return outcome

    async def revoke(self, platform: str, user_id: str) -> tuple[int, int]:
        """``user_id`` no longer let in by pairing on ``platform`` (nor an owner recorded by it):
        (allowlist rows, owner rows) removed."""
        removed = await self._store.write(lambda c: pairing.revoke(c, platform, user_id))
        for (p, _account), ids in self._allowed.items():
            if p == platform:
                ids.discard(user_id)
        if removed[1]:
            self._owners.remove(platform, user_id)
        return removed

    def forgotten(self, platform: str, user_id: str) -> None:
        """A forget deleted ``user_id``'s pairing rows on ``platform``: the memory of them goes too."""
        for (p, _account), ids in self._allowed.items():
            if p == platform:
                ids.discard(user_id)
        self._owners.remove(platform, user_id)

    # -------------------------------------------------------------- listing

    async def snapshot(self) -> tuple[list[pairing.PairingCode], list[pairing.AllowedUser]]:
        """The codes waiting and the users let in (state.db's; config.yaml's lists are not here)."""
        now = self._clock()
        return await self._store.read(lambda c: (pairing.pending(c, now=now), pairing.allowed(c)))


def _count_failure(conn: sqlite3.Connection, code_ids: list[int]) -> None:
    pairing.add_failures(conn, sorted(set(code_ids)), lock_after=LOCK_AFTER)


def _who(row: pairing.PairingCode) -> str:
    return f"{row.user_name} ({row.user_id})" if row.user_name else row.user_id
