"""FakeDiscord against the unchanged discord.py client: what the adapter tests rely on.

discord.py finds the fake through its two class attributes (``Route.BASE``,
``DiscordWebSocket.DEFAULT_GATEWAY``); they are set per test with ``monkeypatch`` and restored after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import discord
import pytest
import yarl
from discord.gateway import DiscordWebSocket

from tests.emulators.fake_discord import INTENT_MESSAGE_CONTENT, IS_VOICE_MESSAGE, DiscordFile, FakeDiscord

WAIT = 10.0


class Bot(discord.Client):
    def __init__(self, **options: Any) -> None:
        intents = options.pop("intents", None)
        if intents is None:
            intents = discord.Intents.default()
            intents.message_content = True
        super().__init__(intents=intents, guild_ready_timeout=0.05, **options)
        self.received: list[discord.Message] = []
        self.readies = 0
        self.resumed = 0
        self.reply: Callable[[discord.Message], Any] | None = None

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        return None  # no 5 s pause before a re-IDENTIFY

    async def on_ready(self) -> None:
        self.readies += 1

    async def on_resumed(self) -> None:
        self.resumed += 1

    async def on_message(self, message: discord.Message) -> None:
        if message.author.bot:
            return
        self.received.append(message)
        if self.reply is not None:
            await self.reply(message)


@pytest.fixture
def point_at(monkeypatch: pytest.MonkeyPatch) -> Callable[[FakeDiscord], None]:
    def apply(fake: FakeDiscord) -> None:
        monkeypatch.setattr(discord.http.Route, "BASE", fake.base_url)
        monkeypatch.setattr(DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake.gateway_url))

    return apply


@asynccontextmanager
async def running(fake: FakeDiscord, bot: Bot, token: str | None = None) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(bot.start(token or fake.token))
    try:
        yield task
    finally:
        await bot.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, WAIT)


async def until(predicate: Callable[[], Any], what: str) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), WAIT)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def test_login_ready_and_a_dm_round_trip(fake_discord: FakeDiscord, point_at: Any) -> None:
    fake = fake_discord
    point_at(fake)
    bot = Bot()

    async def echo(message: discord.Message) -> None:
        async with message.channel.typing():
            sent = await message.reply(f"echo: {message.content}")
        await sent.edit(content="edited")

    bot.reply = echo
    async with running(fake, bot):
        await until(lambda: bot.readies == 1, "on_ready")
        assert fake.connected()
        assert fake.identifies[0]["intents"] & INTENT_MESSAGE_CONTENT
        msg = await fake.user_says("hi")
        sent = await fake.wait_sent(2, timeout=WAIT)
        assert [s["method"] for s in sent] == ["create_message", "edit_message"]
        assert sent[0]["text"] == "echo: hi" and sent[0]["reply_to"] == msg["id"]
        assert sent[1]["text"] == "edited"
        assert fake.calls_to("typing")
        assert isinstance(bot.received[0].channel, discord.DMChannel)
        # The bot's own message came back as an event and was stored in the history.
        assert [m["content"] for m in fake.channel_messages(msg["channel_id"])] == ["hi", "edited"]


async def test_rest_content_type_errors_and_history(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    headers = {"Authorization": f"Bot {fake.token}"}
    for n in range(5):
        await fake.user_says(f"m{n}", chat="general", dispatch=False)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{fake.base_url}/users/@me", headers=headers) as resp:
            assert resp.headers["Content-Type"] == "application/json"  # exactly: discord.py needs it
        async with http.get(f"{fake.base_url}/users/@me", headers={"Authorization": "Bot nope"}) as resp:
            assert resp.status == 401
        url = f"{fake.base_url}/channels/{fake.general}/messages"
        async with http.post(url, headers=headers, json={"content": "x" * 2001}) as resp:
            assert resp.status == 400 and (await resp.json())["code"] == 50035
        async with http.post(url, headers=headers, json={"content": ""}) as resp:
            assert (await resp.json())["code"] == 50006
        async with http.post(f"{fake.base_url}/channels/1/messages", headers=headers, json={"content": "x"}) as resp:
            assert resp.status == 404 and (await resp.json())["code"] == 10003
        first = fake.channel_messages(fake.general)[0]["id"]
        async with http.get(url, headers=headers, params={"after": first, "limit": "2"}) as resp:
            page = await resp.json()
    # The two right after ``after``, newest first (as Discord answers).
    assert [m["content"] for m in page] == ["m2", "m1"]


async def test_429_is_retried_and_threads_take_the_message_id(fake_discord: FakeDiscord, point_at: Any) -> None:
    fake = fake_discord
    point_at(fake)
    bot = Bot()
    async with running(fake, bot):
        await until(lambda: bot.readies == 1, "on_ready")
        channel = bot.get_channel(int(fake.general))
        assert isinstance(channel, discord.TextChannel)
        fake.rate_limit_next("create_message", retry_after=0.05, skip=1)
        first = await channel.send("one")
        await channel.send("two")  # 429 once, then sent again
        statuses = [c.status for c in fake.calls_to("create_message")]
        assert statuses == [200, 429, 200]
        assert [s["text"] for s in fake.sent] == ["one", "two"]
        thread = await first.create_thread(name="from a message")
        assert thread.id == first.id and fake.channels[str(thread.id)]["parent_id"] == fake.general
        standalone = await channel.create_thread(name="standalone", type=discord.ChannelType.public_thread)
        assert standalone.parent_id == channel.id
        with pytest.raises(discord.HTTPException) as exc:
            await first.create_thread(name="again")
        assert exc.value.code == 160004


async def test_reconnect_resumes_and_replays_the_gap(fake_discord: FakeDiscord, point_at: Any) -> None:
    fake = fake_discord
    point_at(fake)
    bot = Bot()
    async with running(fake, bot):
        await until(lambda: bot.readies == 1, "on_ready")
        fake.hold_connections()
        await fake.reconnect()
        await until(lambda: not fake.connected(), "the client to go away")
        await fake.user_says("during the gap")
        fake.release_connections()
        await until(lambda: bot.resumed == 1, "on_resumed")
        await until(lambda: len(bot.received) == 1, "the replayed message")
        assert bot.received[0].content == "during the gap"
        assert len(fake.identifies) == 1 and fake.resumes[0]["session_id"] == "session-1"
        assert [f["d"]["content"] for f in fake.replayed if f["t"] == "MESSAGE_CREATE"] == ["during the gap"]


async def test_after_ready_runs_before_the_guilds_arrive(fake_discord: FakeDiscord, point_at: Any) -> None:
    fake = fake_discord
    point_at(fake)
    bot = Bot()

    async def early() -> None:
        await fake.user_says("before the guilds", chat="general", mention=True)

    fake.after_ready(early)
    async with running(fake, bot):
        await until(lambda: bot.readies == 1 and bot.received, "on_ready and the early message")
    # Parsed between READY and GUILD_CREATE: the guild's channels were not known yet.
    [early_message] = bot.received
    assert early_message.content.endswith("before the guilds")
    assert isinstance(early_message.channel, discord.PartialMessageable)
    assert bot.get_channel(int(fake.general)) is not None  # known once GUILD_CREATE came
    assert fake.calls and all("authorization" not in {k.lower() for k in c.headers} for c in fake.calls)


async def test_invalid_session_reidentifies(fake_discord: FakeDiscord, point_at: Any) -> None:
    fake = fake_discord
    point_at(fake)
    bot = Bot()
    async with running(fake, bot):
        await until(lambda: bot.readies == 1, "on_ready")
        await fake.invalidate(resumable=False)
        await until(lambda: len(fake.identifies) == 2 and fake.connected(), "a second IDENTIFY")
        await fake.user_says("after a new session")
        await until(lambda: len(bot.received) == 1, "a message on the new session")


async def test_close_codes_4004_and_4014(fake_discord: FakeDiscord, point_at: Any) -> None:
    fake = fake_discord
    point_at(fake)
    fake.message_content_allowed = False
    bot = Bot()
    task = asyncio.create_task(bot.start(fake.token))
    with pytest.raises(discord.PrivilegedIntentsRequired):
        await asyncio.wait_for(task, WAIT)
    await bot.close()
    assert fake.close_codes == [4014]
    fake.message_content_allowed = True
    bot = Bot()
    await bot.login(fake.token)
    fake.token = "changed"  # the REST login passed; the gateway now refuses the token
    with pytest.raises(discord.ConnectionClosed) as exc:
        await asyncio.wait_for(bot.connect(), WAIT)
    assert exc.value.code == 4004
    await bot.close()


async def test_without_the_intent_guild_content_is_blank(fake_discord: FakeDiscord, point_at: Any) -> None:
    fake = fake_discord
    point_at(fake)
    bot = Bot(intents=discord.Intents.default())  # no message_content
    async with running(fake, bot):
        await until(lambda: bot.readies == 1, "on_ready")
        await fake.user_says("secret", chat="general")
        await fake.user_says("for you", chat="general", mention=True)
        await fake.user_says("in a DM")
        await until(lambda: len(bot.received) == 3, "three messages")
    assert [m.content for m in bot.received] == ["", f"<@{fake.bot['id']}> for you", "in a DM"]


async def test_attachments_are_served_by_their_signed_urls(fake_discord: FakeDiscord, point_at: Any) -> None:
    fake = fake_discord
    point_at(fake)
    data = bytes(range(256)) * 1000  # several chunks
    bot = Bot()
    async with running(fake, bot):
        await until(lambda: bot.readies == 1, "on_ready")
        msg = await fake.user_says("look", files=[DiscordFile("my report (v2).pdf", data, "application/pdf")])
        voice = await fake.user_says("", files=[DiscordFile("voice-message.ogg", b"OggS", "audio/ogg", voice=True)])
        await until(lambda: len(bot.received) == 2, "both messages")
    [item] = msg["attachments"]
    assert item["filename"] == "my_report__v2_.pdf" and item["title"] == "my report (v2).pdf"
    assert item["size"] == len(data) and item["content_type"] == "application/pdf"
    # discord.py reads them as Discord's own
    pdf, clip = bot.received[0].attachments[0], bot.received[1].attachments[0]
    assert pdf.url == item["url"] and pdf.size == len(data) and not pdf.is_voice_message()
    assert clip.is_voice_message() and clip.duration == 1.5 and bot.received[1].flags.voice
    assert voice["flags"] & IS_VOICE_MESSAGE and voice["content"] == ""

    async with aiohttp.ClientSession() as http:
        for url in (item["url"], item["proxy_url"]):
            async with http.get(url) as resp:
                assert resp.status == 200 and resp.content_length == len(data)
                assert resp.content_type == "application/pdf" and await resp.read() == data
        tampered = yarl.URL(item["url"]).update_query(hm="0" * 64)
        elsewhere = item["url"].replace(f"/attachments/{msg['channel_id']}/", f"/attachments/{fake.general}/")
        for url in (tampered, elsewhere, item["url"].split("?")[0], f"{fake.endpoint()}/attachments/1/2/x.png"):
            async with http.get(url) as resp:
                assert resp.status == 404, url
                assert await resp.text() == "This content is no longer available."
        fake.cdn.ttl = -10
        expired = await fake.user_says("old", files=[DiscordFile("a.txt", b"a", "text/plain")], dispatch=False)
        async with http.get(expired["attachments"][0]["url"]) as resp:
            assert resp.status == 404
    assert fake.cdn.served(item["id"]) == 2
    assert not any(r["authorization"] for r in fake.cdn.requests)
    with pytest.raises(ValueError, match="voice message"):
        await fake.user_says("words", files=[DiscordFile("v.ogg", b"OggS", "audio/ogg", voice=True)])


async def test_without_the_intent_guild_attachments_are_stripped(fake_discord: FakeDiscord, point_at: Any) -> None:
    fake = fake_discord
    point_at(fake)
    bot = Bot(intents=discord.Intents.default())
    files = [DiscordFile("a.png", b"\x89PNG", "image/png")]
    async with running(fake, bot):
        await until(lambda: bot.readies == 1, "on_ready")
        await fake.user_says("secret", chat="general", files=files)
        await fake.user_says("for you", chat="general", mention=True, files=files)
        await until(lambda: len(bot.received) == 2, "two messages")
    assert [len(m.attachments) for m in bot.received] == [0, 1]


async def test_muted_acks_and_heartbeats(fake_discord: FakeDiscord, point_at: Any) -> None:
    fake = fake_discord
    fake.heartbeat_interval = 0.05
    point_at(fake)
    bot = Bot(heartbeat_timeout=0.5)
    async with running(fake, bot):
        await until(lambda: bot.readies == 1, "on_ready")
        await until(lambda: any(acked for _, acked in fake.heartbeats), "an acked heartbeat")
        fake.mute_acks()
        await until(lambda: not fake.heartbeats[-1][1], "an unacked heartbeat")
        # discord.py's own check fires only when nothing at all arrives; it then resumes.
        await until(lambda: bot.resumed >= 1, "a RESUME after silence")
        await until(lambda: fake.heartbeats[-1][1], "heartbeats acked again on the new connection")


async def test_edits_deletes_and_the_per_channel_edit_limit(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    fake.rate_buckets["edit_message"] = (2, 30.0)  # a window no test run outlasts: the third edit is refused
    headers = {"Authorization": f"Bot {fake.token}"}
    theirs = await fake.user_says("not yours", chat="general", dispatch=False)
    async with aiohttp.ClientSession() as http:
        base = f"{fake.base_url}/channels/{fake.general}/messages"
        async with http.post(base, headers=headers, json={"content": "draft"}) as resp:
            mid = (await resp.json())["id"]
        async with http.patch(f"{base}/{mid}", headers=headers, json={"content": "x" * 2001}) as resp:
            assert resp.status == 400 and (await resp.json())["code"] == 50035
            assert resp.headers["X-RateLimit-Remaining"] == "1"  # a refused edit counts too
        async with http.patch(f"{base}/{mid}", headers=headers, json={"content": "final"}) as resp:
            assert resp.status == 200 and (await resp.json())["content"] == "final"
            assert resp.headers["X-RateLimit-Limit"] == "2" and resp.headers["X-RateLimit-Remaining"] == "0"
            assert 0 < float(resp.headers["X-RateLimit-Reset-After"]) <= 30
            assert resp.headers["X-RateLimit-Bucket"]
        async with http.patch(f"{base}/{mid}", headers=headers, json={"content": "too soon"}) as resp:
            assert resp.status == 429 and resp.headers["Via"] and resp.headers["X-RateLimit-Scope"] == "user"
            body = await resp.json()
            assert body["message"] == "You are being rate limited." and body["global"] is False
            assert 0 < body["retry_after"] <= 30 and int(resp.headers["Retry-After"]) >= body["retry_after"]
        # The window is per channel: the DM is not limited by the channel's edits.
        dm = fake.dm_channel()["id"]
        async with http.post(f"{fake.base_url}/channels/{dm}/messages", headers=headers, json={"content": "a"}) as resp:
            dm_mid = (await resp.json())["id"]
        url = f"{fake.base_url}/channels/{dm}/messages/{dm_mid}"
        async with http.patch(url, headers=headers, json={"content": ""}) as resp:
            assert resp.status == 400 and (await resp.json())["code"] == 50006
        fake.rate_buckets.clear()
        async with http.patch(f"{base}/{theirs['id']}", headers=headers, json={"content": "mine now"}) as resp:
            assert resp.status == 403 and (await resp.json())["code"] == 50005
        async with http.patch(f"{base}/1", headers=headers, json={"content": "?"}) as resp:
            assert resp.status == 404 and (await resp.json())["code"] == 10008
        async with http.delete(f"{base}/{mid}", headers=headers) as resp:
            assert resp.status == 204
        async with http.delete(f"{base}/{mid}", headers=headers) as resp:
            assert resp.status == 404 and (await resp.json())["code"] == 10008
    assert [m["content"] for m in fake.channel_messages(fake.general)] == ["not yours"]
    assert [s["text"] for s in fake.sent if s["method"] == "edit_message"] == ["final"]


async def test_discord_py_holds_edits_back_by_the_headers(fake_discord: FakeDiscord, point_at: Any) -> None:
    """What the adapter's streams must not leave to discord.py: given the headers, it sleeps out a used-up
    window itself instead of sending into a 429, so a caller just waits."""
    fake = fake_discord
    fake.rate_buckets["edit_message"] = (2, 0.3)
    point_at(fake)
    bot = Bot()
    async with running(fake, bot):
        await until(lambda: bot.readies == 1, "on_ready")
        channel = bot.get_channel(int(fake.general))
        assert isinstance(channel, discord.TextChannel)
        message = await channel.send("0")
        for n in range(1, 4):
            await message.edit(content=str(n))
    # No 429: discord.py sent the third edit only once the window of the first two had passed (a 429 would
    # have shown here as 429, 200: it retries those).
    assert [c.status for c in fake.calls_to("edit_message")] == [200, 200, 200]


def _form(payload: dict[str, Any], files: list[tuple[str, bytes]]) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("payload_json", json.dumps(payload), content_type="application/json")
    for n, (name, data) in enumerate(files):
        form.add_field(f"files[{n}]", data, filename=name, content_type="application/octet-stream")
    return form


async def test_uploads_caps_and_nonces_on_the_wire(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    fake.upload_limit = 100
    headers = {"Authorization": f"Bot {fake.token}"}
    url = f"{fake.base_url}/channels/{fake.general}/messages"
    async with aiohttp.ClientSession() as http:
        async with http.post(url, headers=headers, data=_form({"content": "two"}, [("a.png", b"\x89PNG"),
                                                                                   ("b.txt", b"hi")])) as resp:
            made = await resp.json()
        assert resp.status == 200 and made["content"] == "two"
        # Discord types an attachment by its name, whatever the part said.
        assert [(a["filename"], a["content_type"], a["size"]) for a in made["attachments"]] == [
            ("a.png", "image/png", 4), ("b.txt", "text/plain", 2)]
        async with http.post(url, headers=headers, data=_form({}, [(f"{n}.txt", b"x") for n in range(11)])) as resp:
            assert resp.status == 400 and (await resp.json())["code"] == 50035
        async with http.post(url, headers=headers, data=_form({}, [("a.bin", b"x" * 60), ("b.bin", b"y" * 41)])) as resp:
            assert resp.status == 413 and (await resp.json()) == {"message": "Request entity too large", "code": 40005}
        async with http.post(url, headers=headers, data=_form({"nonce": "n" * 26, "enforce_nonce": True},
                                                              [("a.bin", b"x")])) as resp:
            assert resp.status == 400 and (await resp.json())["code"] == 50035
        ids = []
        for body in ({"nonce": "once", "enforce_nonce": True}, {"nonce": "once", "enforce_nonce": True},
                     {"nonce": "once"}):
            async with http.post(url, headers=headers, data=_form(body, [("a.bin", b"x")])) as resp:
                ids.append((await resp.json())["id"])
    # Enforced: the second create returns the first message; a nonce without enforce_nonce is not checked.
    assert ids[0] == ids[1] != ids[2]
    assert [m["id"] for m in fake.channel_messages(fake.general)] == [made["id"], ids[0], ids[2]]


async def test_another_application_and_the_same_person_seen_by_it() -> None:
    async with FakeDiscord(application_id=4242) as fake:
        person = fake.add_user("one", user_id="777")
        async with aiohttp.ClientSession() as http:
            headers = {"Authorization": f"Bot {fake.token}"}
            async with http.get(f"{fake.base_url}/users/@me", headers=headers) as resp:
                assert (await resp.json())["id"] == "4242"
            async with http.get(f"{fake.base_url}/oauth2/applications/@me", headers=headers) as resp:
                assert (await resp.json())["id"] == "4242"
        msg = await fake.user_says("hi", user=person, dispatch=False)
        assert msg["author"]["id"] == "777" and fake.users["777"] is person
