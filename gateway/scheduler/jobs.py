"""``Jobs``: make, find, change and remove scheduled jobs (the one instance is ``Services.jobs``).

Every change is one state.db transaction: a refused one (a JobError, whose message is what
the person reads) leaves nothing half-made. The jobs are also kept in memory, so that the
scheduler's heap and ``next_due`` (``/status``) never read state.db.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import secrets
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog

from adapters.base import Adapter
from gateway.config import CronConfig
from gateway.errors import JobError
from gateway.routing.home_channels import HomeChannels
from gateway.scheduler.clock import Clock, SystemClock
from gateway.scheduler.model import JobKind, JobOwner, JobSpec, JobView
from gateway.scheduler.schedules import Schedule, local_zone, parse_schedule, stored_schedule
from storage import CronJobRow, Store, cron

__all__ = ["REQUEST_ONLY", "Jobs", "jobs_of", "owner_of", "view_of"]

log = structlog.get_logger("hermes.cron")

#: platforms that only answer requests: nothing can be posted there later
REQUEST_ONLY = frozenset({"api-server", "cli"})
_CHECK_TIMEOUT = 10.0


def owner_of(row: CronJobRow) -> JobOwner:
    return JobOwner(row.owner_platform, row.owner_chat_id, row.owner_thread_id, row.owner_user_id,
                    row.owner_session_key, row.owner_chat_type)


def view_of(row: CronJobRow) -> JobView:
    next_due = None if row.paused else row.next_due
    kind: JobKind = "cron" if row.kind == "cron" else "every" if row.kind == "every" else "once"
    return JobView(row.id, row.name, row.prompt, row.schedule, kind, row.deliver,
                   owner_of(row), row.paused, next_due, row.last_run_at, row.last_status, row.failures,
                   row.created_at, row.toolsets, "skip" if row.catch_up == "skip" else "once")


class Jobs:
    """The daemon's scheduled jobs; every method refuses with a JobError a person can read."""

    def __init__(self, store: Store, settings: CronConfig, *, adapters: Mapping[str, Adapter],
                 home_channels: HomeChannels, cross_user: bool = False, clock: Clock | None = None) -> None:
        self._store = store
        self.settings = settings
        self.zone = local_zone(settings.timezone)
        self._adapters = adapters
        self._homes = home_channels
        self._cross_user = cross_user
        self.clock: Clock = clock or SystemClock()
        self._rows: dict[str, CronJobRow] = {}
        self._watchers: list[Callable[[CronJobRow], None]] = []
        #: ``status()`` of every job until one changes: the state publisher asks every 2 s, and
        #: 10,000 jobs scanned each time were most of an idle daemon's CPU
        self._summary: dict[str, Any] | None = None
        self._lock = asyncio.Lock()
        #: while ``load``/``reload`` read every job (``_reads`` of them), the jobs changed here
        #: meanwhile, stamped in order: the read may predate their change (``_read_all``)
        self._reads = 0
        self._stamp = 0
        self._changed_at: dict[str, int] = {}

    @property
    def tz(self) -> str:
        """The zone schedules are read in, by name (``describe_job(view, tz=jobs.tz)``)."""
        return self.zone.key

    # ------------------------------------------------------------------ for the scheduler

    async def load(self) -> list[CronJobRow]:
        self._rows = await self._read_all()
        self._summary = None
        return list(self._rows.values())

    async def reload(self) -> None:
        """Read every job again and take what changed, as ``refresh`` does (the scheduler hears of
        each): on several nodes, after this node may have missed other nodes' changes."""
        rows = await self._read_all()
        for gone in [job_id for job_id in self._rows if job_id not in rows]:
            self.refresh(None, gone)
        for row in rows.values():
            if self._rows.get(row.id) != row:
                self.refresh(row)

    async def _read_all(self) -> dict[str, CronJobRow]:
        """Every job as stored, except those changed here while it read: they stay as they are
        now. On several nodes a change another node made is read again after its commit
        (``gateway.daemon.cron_sync``); a read of every job begun before that commit must not undo
        it, and a change after the read began is announced (and read) again anyway."""
        self._reads += 1
        start = self._stamp
        try:
            rows = {r.id: r for r in await self._store.read(cron.all_jobs)}
        finally:
            self._reads -= 1
        for job_id, stamp in self._changed_at.items():
            if stamp > start:
                current = self._rows.get(job_id)
                if current is None:
                    rows.pop(job_id, None)
                else:
                    rows[job_id] = current
        if not self._reads:
            self._changed_at.clear()
        return rows

    def watch(self, callback: Callable[[CronJobRow], None]) -> None:
        """``callback`` hears of every job changed or made (the scheduler's wake-up)."""
        self._watchers.append(callback)

    def row(self, job_id: str) -> CronJobRow | None:
        return self._rows.get(job_id)

    def rows(self) -> Iterable[CronJobRow]:
        return self._rows.values()

    def schedule_of(self, row: CronJobRow) -> Schedule:
        return stored_schedule(row.schedule, row.kind, self.zone, row.next_due)

    def refresh(self, row: CronJobRow | None, job_id: str | None = None) -> None:
        """Take a row the scheduler wrote (None: the job is gone)."""
        self._summary = None
        changed = row.id if row is not None else job_id
        if self._reads and changed is not None:
            self._stamp += 1
            self._changed_at[changed] = self._stamp
        if row is None:
            if job_id is not None:
                self._rows.pop(job_id, None)
            return
        self._rows[row.id] = row
        for callback in self._watchers:
            callback(row)

    # ------------------------------------------------------------------ the contract

    async def create(self, owner: JobOwner, spec: JobSpec) -> JobView:
        s = self.settings
        if not s.enabled:
            raise JobError("Scheduled jobs are switched off here (cron.enabled).")
        name = _valid_name(spec.name)
        prompt = self._valid_prompt(spec.prompt)
        now = self.clock.now()
        schedule = parse_schedule(spec.schedule, self.zone, now=now, min_interval=s.min_interval)
        await self._check_destination(owner, spec.deliver)
        row = CronJobRow(
            id="", name=name, prompt=prompt, schedule=schedule.text, kind=schedule.kind, deliver=spec.deliver.strip(),
            toolsets=tuple(spec.toolsets) if spec.toolsets is not None else None, catch_up=spec.catch_up,
            owner_platform=owner.platform, owner_chat_id=owner.chat_id, owner_thread_id=owner.thread_id,
            owner_user_id=owner.user_id, owner_session_key=owner.session_key, owner_chat_type=owner.chat_type,
            paused=False, next_due=schedule.first_due(now), run_requested=False, last_run_at=None,
            last_status=None, failures=0, created_at=now, updated_at=now,
        )
        limit = s.max_jobs_per_owner

        def op(conn: sqlite3.Connection) -> CronJobRow:
            # A user's jobs in all their chats count together: a new chat is no way around the limit.
            if cron.count_owned(conn, owner.session_key, owner.platform, owner.user_id) >= limit:
                raise JobError(f"You have {limit} scheduled jobs already, the most one may have "
                               "(cron.max_jobs_per_owner). Remove one first.")
            for _ in range(5):
                made = dataclasses.replace(row, id=secrets.token_hex(4))
                if cron.get(conn, made.id) is not None:
                    continue  # a new id, not an error: 4 bytes do collide now and then
                if not cron.insert(conn, made):
                    raise JobError(f"There is a job named {name!r} here already; choose another name.")
                return made
            raise JobError("Could not find a free job id; try again.")

        made = await self._store.write(op)
        self.refresh(made)
        log.info("cron.created", job_id=made.id, session_key=owner.session_key, kind=made.kind,
                 deliver=made.deliver)
        return view_of(made)

    async def list(self, viewer: JobOwner | None) -> list[JobView]:
        rows = sorted((r for r in self._rows.values() if self._visible(viewer, r)),
                      key=lambda r: (r.created_at, r.name, r.id))
        return [view_of(r) for r in rows]

    async def get(self, viewer: JobOwner | None, ref: str) -> JobView:
        return view_of(self._find(viewer, ref))

    async def update(self, viewer: JobOwner | None, ref: str, *, name: str | None = None,
                     prompt: str | None = None, schedule: str | None = None, deliver: str | None = None,
                     toolsets: tuple[str, ...] | None = None) -> JobView:
        row = self._find(viewer, ref)
        fields: dict[str, Any] = {}
        if name is not None:
            fields["name"] = _valid_name(name)
        if prompt is not None:
            fields["prompt"] = self._valid_prompt(prompt)
        if schedule is not None:
            now = self.clock.now()
            parsed = parse_schedule(schedule, self.zone, now=now, min_interval=self.settings.min_interval)
            fields.update(schedule=parsed.text, kind=parsed.kind, next_due=parsed.first_due(now))
        if deliver is not None:
            await self._check_destination(owner_of(row), deliver)
            fields["deliver"] = deliver.strip()
        if toolsets is not None:
            fields["toolsets"] = tuple(toolsets)
        if not fields:
            return view_of(row)
        return view_of(await self._change(row, fields))

    async def pause(self, viewer: JobOwner | None, ref: str) -> JobView:
        row = self._find(viewer, ref)
        return view_of(row if row.paused else await self._change(row, {"paused": True}))

    async def resume(self, viewer: JobOwner | None, ref: str) -> JobView:
        row = self._find(viewer, ref)
        if not row.paused:
            return view_of(row)
        now = self.clock.now()
        fields: dict[str, Any] = {"paused": False, "failures": 0}
        if row.kind != "once":
            # Due times that passed while it was paused are not made up for.
            fields["next_due"] = self.schedule_of(row).next_after(now, now)
        elif row.next_due is not None and row.next_due < now:
            fields["next_due"] = now  # a one-shot paused past its time runs now, once
        return view_of(await self._change(row, fields))

    async def remove(self, viewer: JobOwner | None, ref: str) -> JobView:
        row = self._find(viewer, ref)
        await self._store.write(lambda c: cron.delete(c, row.id))
        self.refresh(None, row.id)
        log.info("cron.removed", job_id=row.id)
        return view_of(row)

    async def run_now(self, viewer: JobOwner | None, ref: str) -> JobView:
        row = self._find(viewer, ref)
        return view_of(await self._change(row, {"run_requested": True}))

    def next_due(self, viewer: JobOwner | None = None) -> JobView | None:
        """The job due soonest (of those ``viewer`` sees; None: of all)."""
        soonest: CronJobRow | None = None
        for r in self._rows.values():
            if r.paused or r.next_due is None or (viewer is not None and not self._visible(viewer, r)):
                continue
            if soonest is None or r.next_due < (soonest.next_due or 0.0):
                soonest = r
        return None if soonest is None else view_of(soonest)

    def status(self, viewer: JobOwner | None = None) -> dict[str, Any]:
        """What /status and ``hermes-gateway status`` show of the jobs (those ``viewer`` sees):
        how many, how many paused, and the next one due."""
        if viewer is None and self._summary is not None:
            return dict(self._summary)
        rows = [r for r in self._rows.values() if viewer is None or self._visible(viewer, r)]
        soonest = self.next_due(viewer)
        nxt = None
        if soonest is not None and soonest.next_due is not None:
            local = dt.datetime.fromtimestamp(soonest.next_due, self.zone).strftime("%Y-%m-%d %H:%M %Z")
            nxt = {"id": soonest.id, "name": soonest.name, "due": soonest.next_due, "due_local": local}
        summary = {"jobs": len(rows), "paused": sum(r.paused for r in rows), "next": nxt}
        if viewer is None:
            self._summary = summary
        return dict(summary)

    # ------------------------------------------------------------------ helpers

    def _visible(self, viewer: JobOwner | None, row: CronJobRow) -> bool:
        if viewer is None or self._cross_user or row.owner_session_key == viewer.session_key:
            return True
        return viewer.user_id is not None and (row.owner_platform, row.owner_user_id) == (viewer.platform,
                                                                                           viewer.user_id)

    def _find(self, viewer: JobOwner | None, ref: str) -> CronJobRow:
        ref = ref.strip()
        if not ref:
            raise JobError("Which job? Give its name or id (/cron list shows them).")
        seen = [r for r in self._rows.values() if self._visible(viewer, r)]
        for match in ([r for r in seen if r.id == ref.lower()], [r for r in seen if r.name == ref],
                      [r for r in seen if r.name.casefold() == ref.casefold()],
                      [r for r in seen if len(ref) >= 4 and r.id.startswith(ref.lower())]):
            if len(match) == 1:
                return match[0]
            if len(match) > 1:
                ids = ", ".join(sorted(r.id for r in match))
                raise JobError(f"Several jobs are called {ref!r} ({ids}); name one by its id.")
        raise JobError(f"No job {ref!r} here (/cron list shows the jobs you can see).")

    async def _change(self, row: CronJobRow, fields: Mapping[str, Any]) -> CronJobRow:
        now = self.clock.now()

        def op(conn: sqlite3.Connection) -> CronJobRow | None:
            try:
                if not cron.update(conn, row.id, fields, now=now):
                    return None
            except sqlite3.IntegrityError:
                raise JobError(f"There is a job named {fields.get('name')!r} here already; "
                               "choose another name.") from None
            return cron.get(conn, row.id)

        changed = await self._store.write(op)
        if changed is None:
            self.refresh(None, row.id)
            raise JobError(f"The job {row.name!r} was removed meanwhile.")
        self.refresh(changed)
        log.info("cron.changed", job_id=row.id, fields=sorted(fields))
        return changed

    def _valid_prompt(self, prompt: str) -> str:
        text = prompt.strip()
        if not text:
            raise JobError("The job needs a prompt: what should the agent do each time?")
        limit = self.settings.max_prompt_chars
        if len(text) > limit:
            raise JobError(f"The prompt is {len(text):,} characters long; a job's prompt may have at most "
                           f"{limit:,} (cron.max_prompt_chars).")
        return text

    async def _check_destination(self, owner: JobOwner, deliver: str) -> None:
        target = deliver.strip()
        can = sorted(p for p in self._adapters if p not in REQUEST_ONLY)
        posts = ", ".join(can) or "none"
        if target == "none":
            return
        if target == "origin":
            if owner.platform in REQUEST_ONLY or owner.platform not in self._adapters:
                raise JobError(f"Answers cannot be sent to this chat later ({owner.platform} only answers "
                               f"requests). Deliver to home:<platform>, <platform>:<chat id> or none "
                               f"(platforms here: {posts}).")
            return
        platform, _, rest = target.partition(":")
        if not rest:
            raise JobError(f"I do not know where {target!r} is. Deliver to origin, home:<platform>, "
                           "<platform>:<chat id>[:<thread id>] or none.")
        if platform == "home":
            if rest not in self._adapters or rest in REQUEST_ONLY:
                raise JobError(f"{rest!r} is not a platform this gateway can post to (here: {posts}).")
            if await self._homes.get(rest) is None:
                raise JobError(f"{rest} has no home channel yet. Send /sethome in the {rest} chat where "
                               "the answers should go, then try again.")
            return
        adapter = self._adapters.get(platform)
        if adapter is None or platform in REQUEST_ONLY:
            raise JobError(f"{platform!r} is not a platform this gateway can post to (here: {posts}).")
        chat_id = rest.split(":", 1)[0]
        try:
            await asyncio.wait_for(adapter.get_chat_info(chat_id), _CHECK_TIMEOUT)
        except Exception as exc:
            log.info("cron.destination_refused", platform=platform, error=type(exc).__name__)
            raise JobError(f"The bot cannot post to {platform} chat {chat_id} (it does not know that chat, "
                           "or may not write there).") from None



def _valid_name(name: str) -> str:
    text = " ".join(name.split())
    if not 1 <= len(text) <= 64 or not text.isprintable():
        raise JobError("A job's name has 1 to 64 printable characters.")
    return text


def jobs_of(services: Any) -> Jobs | None:
    """``services.jobs`` typed (routing sits below the scheduler, so ``Services`` cannot name it)."""
    jobs = getattr(services, "jobs", None)
    return jobs if isinstance(jobs, Jobs) else None
