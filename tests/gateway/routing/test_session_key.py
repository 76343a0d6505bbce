"""Session keys: the reference's format, every flag combination, and no forgery.

* a table of every chat type x thread/no thread x user/no user x the four flag
  combinations, written out literally (not recomputed from the rules);
* the examples pinned by the reference (inventory §2), verbatim;
* only platform, chat type, chat, thread and user reach the key;
* ids containing ``:`` or ``%`` cannot pose as other segments (property test:
  with per-user sessions two messages share a key exactly when the rules say
  they are the same conversation).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.base import Adapter, ChatType, InboundMessage
from gateway.routing.session_key import SessionKeySettings, build_session_key, is_shared_session

DEFAULT = SessionKeySettings()


def msg(
    chat_type: ChatType,
    chat_id: str = "c1",
    *,
    platform: str = "discord",
    user_id: str | None = "u1",
    thread_id: str | None = None,
    **extra: Any,
) -> InboundMessage:
    return InboundMessage(
        platform=platform,
        chat_id=chat_id,
        chat_type=chat_type,
        user_id=user_id,
        text="hello",
        thread_id=thread_id,
        timestamp=0.0,
        **extra,
    )


# (group_sessions_per_user, thread_sessions_per_user), in the column order below.
FLAGS = [(True, False), (True, True), (False, False), (False, True)]

P = "agent:main:discord"
# chat type, thread id, user id -> expected key for each of FLAGS
TABLE: list[tuple[ChatType, str | None, str | None, tuple[str, str, str, str]]] = [
    # DMs ignore both flags and never carry the user.
    (ChatType.DM, None, "u1", (f"{P}:dm:c1",) * 4),
    (ChatType.DM, None, None, (f"{P}:dm:c1",) * 4),
    (ChatType.DM, "t1", "u1", (f"{P}:dm:c1:t1",) * 4),
    (ChatType.DM, "t1", None, (f"{P}:dm:c1:t1",) * 4),
    # Groups: per user by default, threads shared unless thread_sessions_per_user.
    (ChatType.GROUP, None, "u1", (f"{P}:group:c1:u1", f"{P}:group:c1:u1", f"{P}:group:c1", f"{P}:group:c1")),
    (ChatType.GROUP, None, None, (f"{P}:group:c1",) * 4),
    (
        ChatType.GROUP,
        "t1",
        "u1",
        (f"{P}:group:c1:t1", f"{P}:group:c1:t1:u1", f"{P}:group:c1:t1", f"{P}:group:c1:t1"),
    ),
    (
        ChatType.GROUP,
        "t1",
        None,
        (f"{P}:group:c1:t1", f"{P}:group:c1:t1:", f"{P}:group:c1:t1", f"{P}:group:c1:t1"),
    ),
    # Channels: the same isolation rule as groups.
    (
        ChatType.CHANNEL,
        None,
        "u1",
        (f"{P}:channel:c1:u1", f"{P}:channel:c1:u1", f"{P}:channel:c1", f"{P}:channel:c1"),
    ),
    (ChatType.CHANNEL, None, None, (f"{P}:channel:c1",) * 4),
    (
        ChatType.CHANNEL,
        "t1",
        "u1",
        (f"{P}:channel:c1:t1", f"{P}:channel:c1:t1:u1", f"{P}:channel:c1:t1", f"{P}:channel:c1:t1"),
    ),
    (
        ChatType.CHANNEL,
        "t1",
        None,
        (f"{P}:channel:c1:t1", f"{P}:channel:c1:t1:", f"{P}:channel:c1:t1", f"{P}:channel:c1:t1"),
    ),
    # A THREAD chat (a Discord or Slack thread, its channel as the chat) keys as the
    # reference's "group thread" on every platform, and is shared even without a thread id.
    (
        ChatType.THREAD,
        None,
        "u1",
        (f"{P}:group:c1", f"{P}:group:c1:u1", f"{P}:group:c1", f"{P}:group:c1"),
    ),
    (ChatType.THREAD, None, None, (f"{P}:group:c1",) * 4),
    (
        ChatType.THREAD,
        "t1",
        "u1",
        (f"{P}:group:c1:t1", f"{P}:group:c1:t1:u1", f"{P}:group:c1:t1", f"{P}:group:c1:t1"),
    ),
    (
        ChatType.THREAD,
        "t1",
        None,
        (f"{P}:group:c1:t1", f"{P}:group:c1:t1:", f"{P}:group:c1:t1", f"{P}:group:c1:t1"),
    ),
]

CASES = [
    pytest.param(
        chat_type,
        thread_id,
        user_id,
        flags,
        expected[i],
        id=f"{chat_type.value}-thread={thread_id}-user={user_id}-group_pu={flags[0]}-thread_pu={flags[1]}",
    )
    for chat_type, thread_id, user_id, expected in TABLE
    for i, flags in enumerate(FLAGS)
]


def test_table_covers_every_combination() -> None:
    combos = {(c, t, u, f) for c, t, u, _ in TABLE for f in FLAGS}
    assert len(CASES) == len(combos) == len(ChatType) * 2 * 2 * 4


@pytest.mark.parametrize(("chat_type", "thread_id", "user_id", "flags", "expected"), CASES)
def test_key_table(
    chat_type: ChatType, thread_id: str | None, user_id: str | None, flags: tuple[bool, bool], expected: str
) -> None:
    key_settings = SessionKeySettings(group_sessions_per_user=flags[0], thread_sessions_per_user=flags[1])
    assert build_session_key(msg(chat_type, user_id=user_id, thread_id=thread_id), key_settings) == expected


# -- the examples pinned by the reference ---------------------------------------------


def test_reference_examples() -> None:
    tg_dm = msg(ChatType.DM, "99", platform="telegram", user_id="99")
    assert build_session_key(tg_dm, DEFAULT) == "agent:main:telegram:dm:99"
    tg_dm_topic = msg(ChatType.DM, "99", platform="telegram", user_id="99", thread_id="topic-1")
    assert build_session_key(tg_dm_topic, DEFAULT) == "agent:main:telegram:dm:99:topic-1"

    guild = msg(ChatType.GROUP, "guild-123", platform="discord", user_id="alice")
    assert build_session_key(guild, DEFAULT) == "agent:main:discord:group:guild-123:alice"
    shared = SessionKeySettings(group_sessions_per_user=False)
    assert build_session_key(guild, shared) == "agent:main:discord:group:guild-123"

    topic = msg(ChatType.GROUP, "-1002285219667", platform="telegram", user_id="42", thread_id="17585")
    assert build_session_key(topic, DEFAULT) == "agent:main:telegram:group:-1002285219667:17585"
    per_user_threads = SessionKeySettings(thread_sessions_per_user=True)
    assert build_session_key(topic, per_user_threads) == "agent:main:telegram:group:-1002285219667:17585:42"


def _platform_adapters() -> list[Adapter]:
    from adapters.discord import DiscordAdapter, DiscordSettings
    from adapters.slack import SlackAdapter, SlackSettings
    from adapters.telegram import TelegramAdapter, TelegramSettings

    return [TelegramAdapter(TelegramSettings(token="1:abc")), DiscordAdapter(DiscordSettings(token="t")),
            SlackAdapter(SlackSettings(bot_token="xoxb-1", app_token="xapp-1"))]


# The chat type a platform's group or channel messages carry (what its adapter reports,
# per the adapters' _inbound docstrings): Telegram groups are groups, Discord guild
# channels and Slack channels are channels.
_ROOM_TYPE = {"telegram": ChatType.GROUP, "discord": ChatType.CHANNEL, "slack": ChatType.CHANNEL}


@pytest.mark.parametrize("adapter", _platform_adapters(), ids=lambda a: a.platform)
def test_the_reference_key_table_row_by_row(adapter: Adapter) -> None:
    """sessions.md, "Chat Type | Default Key Format", for each platform, on messages
    described as that platform's adapter describes them."""
    p = adapter.platform
    room = _ROOM_TYPE[p]

    def key(message: InboundMessage, **flags: bool) -> str:
        return build_session_key(message, SessionKeySettings(**flags))

    # DM: agent:main:<platform>:dm:<chat_id>
    assert key(msg(ChatType.DM, "99", platform=p, user_id="99")) == f"agent:main:{p}:dm:99"
    # Group chat: agent:main:<platform>:group:<chat_id>:<user_id>
    assert key(msg(ChatType.GROUP, "g1", platform=p, user_id="u7")) == f"agent:main:{p}:group:g1:u7"
    # Group thread/topic: agent:main:<platform>:group:<chat_id>:<thread_id>, shared by default ...
    alice = adapter.inbound_in_thread("g1", room, "t5", user_id="alice", text="hi")
    bob = adapter.inbound_in_thread("g1", room, "t5", user_id="bob", text="hi")
    assert key(alice) == key(bob) == f"agent:main:{p}:group:g1:t5"
    # ... per user with thread_sessions_per_user: true.
    assert key(alice, thread_sessions_per_user=True) == f"agent:main:{p}:group:g1:t5:alice"
    # Channel: agent:main:<platform>:channel:<chat_id>:<user_id>
    assert key(msg(ChatType.CHANNEL, "c1", platform=p, user_id="u7")) == f"agent:main:{p}:channel:c1:u7"
    # group_sessions_per_user: false -> one shared session per room.
    assert key(msg(room, "g1", platform=p, user_id="u7"), group_sessions_per_user=False) == (
        f"agent:main:{p}:{room.value}:g1")


def test_reference_table_channel() -> None:
    channel = msg(ChatType.CHANNEL, "C042", platform="slack", user_id="U7")
    assert build_session_key(channel, DEFAULT) == "agent:main:slack:channel:C042:U7"


def test_thread_shared_between_participants_by_default() -> None:
    alice = msg(ChatType.GROUP, "-100", platform="telegram", user_id="1", thread_id="17585")
    bob = dataclasses.replace(alice, user_id="2")
    assert build_session_key(alice, DEFAULT) == build_session_key(bob, DEFAULT)
    per_user_threads = SessionKeySettings(thread_sessions_per_user=True)
    assert build_session_key(alice, per_user_threads) != build_session_key(bob, per_user_threads)


def test_group_members_are_isolated_by_default() -> None:
    alice = msg(ChatType.GROUP, "g", user_id="alice")
    bob = dataclasses.replace(alice, user_id="bob")
    assert build_session_key(alice, DEFAULT) != build_session_key(bob, DEFAULT)


# -- DM fallbacks and missing identifiers ---------------------------------------------


@pytest.mark.parametrize(
    ("chat_id", "user_id", "thread_id", "expected"),
    [
        ("", "jordan", None, "agent:main:telegram:dm:jordan"),
        ("", "jordan", "t9", "agent:main:telegram:dm:jordan:t9"),
        ("", None, "t9", "agent:main:telegram:dm:t9"),
        ("", "", "t9", "agent:main:telegram:dm:t9"),
        ("", None, None, "agent:main:telegram:dm"),
        ("", "", "", "agent:main:telegram:dm"),
    ],
)
def test_dm_without_chat_id_falls_back(
    chat_id: str, user_id: str | None, thread_id: str | None, expected: str
) -> None:
    message = msg(ChatType.DM, chat_id, platform="telegram", user_id=user_id, thread_id=thread_id)
    assert build_session_key(message, DEFAULT) == expected


def test_user_never_appended_in_dms() -> None:
    for flags in FLAGS:
        key_settings = SessionKeySettings(group_sessions_per_user=flags[0], thread_sessions_per_user=flags[1])
        a = msg(ChatType.DM, "99", user_id="99", thread_id="t")
        b = dataclasses.replace(a, user_id="someone-else")
        assert (
            build_session_key(a, key_settings)
            == build_session_key(b, key_settings)
            == ("agent:main:discord:dm:99:t")
        )


@pytest.mark.parametrize("chat_type", [ChatType.GROUP, ChatType.CHANNEL])
def test_room_without_participant_is_one_shared_session(chat_type: ChatType) -> None:
    none = msg(chat_type, "room", user_id=None)
    empty = msg(chat_type, "room", user_id="")
    assert build_session_key(none, DEFAULT) == build_session_key(empty, DEFAULT)
    assert build_session_key(none, DEFAULT) == f"agent:main:discord:{chat_type.value}:room"


def test_empty_thread_id_is_no_thread() -> None:
    assert build_session_key(msg(ChatType.GROUP, thread_id=""), DEFAULT) == "agent:main:discord:group:c1:u1"


def test_room_without_chat_id_keeps_its_position() -> None:
    # The reference drops an empty chat id, which would let the user id take its
    # place (group:<user>) and meet the shared key of a chat named like that user.
    no_chat = msg(ChatType.GROUP, "", user_id="bob")
    chat_named_bob = msg(ChatType.GROUP, "bob", user_id=None)
    assert build_session_key(no_chat, DEFAULT) == "agent:main:discord:group::bob"
    assert build_session_key(no_chat, DEFAULT) != build_session_key(chat_named_bob, DEFAULT)


def test_namespace_is_configurable() -> None:
    work = SessionKeySettings(namespace="agent:work")
    assert build_session_key(msg(ChatType.DM, "99"), work) == "agent:work:discord:dm:99"


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT.group_sessions_per_user = False  # type: ignore[misc]


# -- escaping -----------------------------------------------------------------------


def test_colon_in_an_id_is_escaped() -> None:
    assert (
        build_session_key(msg(ChatType.GROUP, "a:b", user_id="c"), DEFAULT)
        == "agent:main:discord:group:a%3Ab:c"
    )
    assert build_session_key(msg(ChatType.DM, "50%"), DEFAULT) == "agent:main:discord:dm:50%25"
    assert build_session_key(msg(ChatType.DM, "x", platform="a:b"), DEFAULT) == "agent:main:a%3Ab:dm:x"


def test_an_id_cannot_forge_another_users_session() -> None:
    # Without escaping, chat "g:mallory" with no user would be group:g:mallory,
    # which is mallory's own session in chat g.
    mallory = msg(ChatType.GROUP, "g", user_id="mallory")
    forged = msg(ChatType.GROUP, "g:mallory", user_id=None)
    assert build_session_key(mallory, DEFAULT) != build_session_key(forged, DEFAULT)
    # ...and an id that already looks escaped stays distinct from the real thing.
    looks_escaped = msg(ChatType.GROUP, "g%3Amallory", user_id=None)
    assert len({build_session_key(m, DEFAULT) for m in (mallory, forged, looks_escaped)}) == 3


def test_thread_without_user_is_not_a_members_session() -> None:
    # Per-user threads: topic "42" with no sender must not land in member 42's session.
    key_settings = SessionKeySettings(thread_sessions_per_user=True)
    topic_no_user = msg(ChatType.GROUP, "g", user_id=None, thread_id="42")
    member_42 = msg(ChatType.GROUP, "g", user_id="42")
    assert build_session_key(topic_no_user, key_settings) != build_session_key(member_42, key_settings)


def test_default_flags_inherit_the_reference_format_limit() -> None:
    # Documented in the module: with shared threads the reference format gives
    # <chat>:<thread> and <chat>:<user> the same shape. Pinned here so a change
    # of format is a decision, not an accident.
    topic = msg(ChatType.GROUP, "g", user_id="7", thread_id="42")
    member_42 = msg(ChatType.GROUP, "g", user_id="42")
    assert build_session_key(topic, DEFAULT) == build_session_key(member_42, DEFAULT)


def test_unknown_chat_type_is_rejected() -> None:
    bogus = dataclasses.replace(msg(ChatType.GROUP), chat_type="forum")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="forum"):
        build_session_key(bogus, DEFAULT)


# -- purity -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"text": "something else entirely"},
        {"message_id": "m-2"},
        {"user_name": "Alice Liddell"},
        {"chat_name": "The Tea Party"},
        {"timestamp": 1e9},
        {"reply_to": "m-1"},
        {"dedupe_id": "other"},
        {"addressed": False},
        {"pre_authorized": True},
        {"raw": {"anything": 1}},
    ],
    ids=lambda change: next(iter(change)),
)
@pytest.mark.parametrize("chat_type", list(ChatType))
def test_only_identity_fields_reach_the_key(chat_type: ChatType, change: dict[str, Any]) -> None:
    base = msg(chat_type, "c", user_id="u", thread_id="t", message_id="m-1", user_name="alice")
    for flags in FLAGS:
        key_settings = SessionKeySettings(group_sessions_per_user=flags[0], thread_sessions_per_user=flags[1])
        key = build_session_key(base, key_settings)
        assert build_session_key(base, key_settings) == key
        assert build_session_key(dataclasses.replace(base, **change), key_settings) == key


# -- properties ---------------------------------------------------------------------


def conversation(message: InboundMessage, key_settings: SessionKeySettings) -> tuple[object, ...]:
    """What the rules say identifies a conversation, written independently of the code."""
    chat, thread, user = message.chat_id or None, message.thread_id or None, message.user_id or None
    if message.chat_type == ChatType.DM:
        owner = chat or user
        if owner is None:  # the thread id stands in for the owner; nothing else is left
            return (message.platform, "dm", thread, None)
        return (message.platform, "dm", owner, thread)
    in_thread = thread is not None or message.chat_type == ChatType.THREAD
    isolate = key_settings.group_sessions_per_user and (
        not in_thread or key_settings.thread_sessions_per_user
    )
    # A thread chat is a thread of its chat, as the reference's key table says of every thread.
    kind = ChatType.GROUP.value if message.chat_type == ChatType.THREAD else message.chat_type.value
    return (message.platform, kind, chat, thread, user if isolate else None)


ALL_SETTINGS = [SessionKeySettings(group_sessions_per_user=g, thread_sessions_per_user=t) for g, t in FLAGS]
PER_USER = SessionKeySettings(group_sessions_per_user=True, thread_sessions_per_user=True)


def every_message(platforms: list[str], ids: list[str]) -> list[InboundMessage]:
    """All messages over these ids: every chat type, chat, user and thread (or none)."""
    maybe: list[str | None] = [None, *ids]
    return [
        msg(chat_type, chat, platform=platform, user_id=user, thread_id=thread)
        for platform, chat_type, chat, user, thread in itertools.product(
            platforms, ChatType, ids, maybe, maybe
        )
    ]


def check_keys_against_conversations(
    messages: list[InboundMessage], key_settings: SessionKeySettings, *, injective: bool
) -> None:
    keys_of: dict[tuple[object, ...], set[str]] = defaultdict(set)
    conversations_of: dict[str, set[tuple[object, ...]]] = defaultdict(set)
    for message in messages:
        key = build_session_key(message, key_settings)
        keys_of[conversation(message, key_settings)].add(key)
        conversations_of[key].add(conversation(message, key_settings))
    # One conversation, one key: the rules' sharing is honoured.
    assert {c: k for c, k in keys_of.items() if len(k) > 1} == {}
    if injective:
        # One key, one conversation: no id can reach someone else's session.
        assert {k: c for k, c in conversations_of.items() if len(c) > 1} == {}


# Ids made of the separator and the escape sequence, so that concatenations
# ("a:b" vs "a" then "b") and escape look-alikes ("%3A" vs ":") are in play.
_ID = st.text(alphabet="a:%3A", max_size=4)


@settings(max_examples=200, deadline=None)
@given(
    platforms=st.lists(_ID.filter(bool), min_size=1, max_size=2, unique=True),
    ids=st.lists(_ID, min_size=1, max_size=4, unique=True),
)
def test_keys_collide_exactly_when_the_conversation_is_the_same(platforms: list[str], ids: list[str]) -> None:
    check_keys_against_conversations(every_message(platforms, ids), PER_USER, injective=True)


@settings(max_examples=100, deadline=None)
@given(
    platforms=st.lists(_ID.filter(bool), min_size=1, max_size=2, unique=True),
    ids=st.lists(_ID, min_size=1, max_size=4, unique=True),
    key_settings=st.sampled_from(ALL_SETTINGS),
)
def test_same_conversation_same_key_under_every_setting(
    platforms: list[str], ids: list[str], key_settings: SessionKeySettings
) -> None:
    # The default flags keep the reference's shared-thread shape (pinned above),
    # so only the other combinations are also required to be collision-free.
    check_keys_against_conversations(
        every_message(platforms, ids), key_settings, injective=key_settings != DEFAULT
    )


@pytest.mark.parametrize("key_settings", ALL_SETTINGS, ids=repr)
def test_no_collisions_over_a_fixed_tricky_pool(key_settings: SessionKeySettings) -> None:
    ids = ["", "a", "b", "a:b", "b:a", ":", "%", "%3A", "a%3Ab", "a:"]
    check_keys_against_conversations(
        every_message(["t", "t:a", "t%3Aa"], ids), key_settings, injective=key_settings != DEFAULT
    )


@pytest.mark.parametrize(
    ("chat_type", "thread", "user", "per_user", "thread_per_user", "shared"),
    [
        (ChatType.DM, None, "u", True, False, False),
        (ChatType.GROUP, None, "u", True, False, False),
        (ChatType.GROUP, None, "u", False, False, True),
        (ChatType.GROUP, "t", "u", True, False, True),
        (ChatType.GROUP, "t", "u", True, True, False),
        (ChatType.GROUP, None, None, True, False, True),
        (ChatType.CHANNEL, None, "u", True, False, False),
        (ChatType.THREAD, None, "u", True, False, True),
    ],
)
def test_is_shared_session_matches_whether_the_key_names_the_user(
    chat_type: ChatType, thread: str | None, user: str | None, per_user: bool, thread_per_user: bool, shared: bool
) -> None:
    msg = InboundMessage(platform="p", chat_id="c", chat_type=chat_type, user_id=user, text="x", thread_id=thread)
    settings = SessionKeySettings(group_sessions_per_user=per_user, thread_sessions_per_user=thread_per_user)
    assert is_shared_session(msg, settings) is shared
    if chat_type is not ChatType.DM and user is not None:
        assert build_session_key(msg, settings).endswith(f":{user}") is (not shared)
