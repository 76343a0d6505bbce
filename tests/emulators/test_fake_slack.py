"""FakeSlack proven with the real slack-sdk / slack-bolt (no gateway code involved)."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.emulators.fake_slack import (
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER,
    LOGIN_PAGE,
    SIGNING_SECRET,
    TIER_LIMITS,
    FakeSlack,
    SlackFile,
)


def client(fake: FakeSlack, token: str = BOT_TOKEN) -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=fake.api_base_url)


def echo_app(fake: FakeSlack, got: list[dict[str, Any]]) -> AsyncApp:
    app = AsyncApp(client=client(fake), signing_secret=SIGNING_SECRET)

    @app.event("message")
    async def on_message(event: dict[str, Any], say: Any) -> None:
        got.append(event)
        await say(text=f"echo: {event.get('text')}", thread_ts=event["ts"])

    return app


async def test_web_api_and_tokens(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    me = await client(fake).auth_test()
    assert me["user_id"] == BOT_USER
    sent = await client(fake).chat_postMessage(channel="C1", text="hi", thread_ts="1.000001")
    upd = await client(fake).chat_update(channel="C1", ts=sent["ts"], text="edited")
    assert upd["ok"] and fake.messages[("C1", sent["ts"])]["text"] == "edited"
    assert [(m["method"], m["thread_id"]) for m in fake.sent] == [("chat.postMessage", "1.000001"),
                                                                  ("chat.update", "1.000001")]
    with pytest.raises(SlackApiError) as bad:
        await client(fake, "xoxb-nope").auth_test()
    assert bad.value.response["error"] == "invalid_auth"
    with pytest.raises(SlackApiError) as wrong_kind:
        await client(fake).apps_connections_open(app_token=BOT_TOKEN)
    assert wrong_kind.value.response["error"] == "not_allowed_token_type"
    opened = await client(fake).apps_connections_open(app_token=APP_TOKEN)
    assert opened["url"].startswith("ws://127.0.0.1:")
    info = await client(fake).conversations_info(channel="D9")
    assert info["channel"]["is_im"] is True
    # Calls are recorded without credentials (the token is still checked, as above).
    assert fake.calls and all("authorization" not in {k.lower() for k in c.headers} for c in fake.calls)
    assert all(BOT_TOKEN not in repr(c) and APP_TOKEN not in repr(c) for c in fake.calls)


async def test_rate_limit_is_a_429_with_retry_after(fake_slack: FakeSlack) -> None:
    fake_slack.fail_next("chat.postMessage", 429, headers={"Retry-After": "7"})
    with pytest.raises(SlackApiError) as limited:
        await client(fake_slack).chat_postMessage(channel="C1", text="x")
    assert limited.value.response.status_code == 429
    assert limited.value.response.headers["Retry-After"] == "7"
    assert not fake_slack.sent


async def test_socket_mode_round_trip_disconnect_and_silence(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    got: list[dict[str, Any]] = []
    handler = AsyncSocketModeHandler(echo_app(fake, got), app_token=APP_TOKEN, ping_interval=0.5)
    await handler.connect_async()
    try:
        await fake.wait_for(lambda: fake.open_sockets, 5, what="a socket")
        body = await fake.user_says("hello")
        await fake.wait_reply("D0DM0001", body["event"]["ts"], text="echo: hello")
        assert fake.acks
        await fake.disconnect("refresh_requested")
        await fake.wait_for(lambda: len(fake.sockets) == 2 and len(fake.open_sockets) == 1, 5, what="reconnect")
        # Silence: no pongs, so the client's heartbeat gives the socket up.
        fake.go_silent()
        await fake.wait_for(lambda: fake.sockets[1].closed.is_set(), 10, what="the silent socket to close")
    finally:
        await handler.close_async()


async def test_events_api_signed_posts_and_retries(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    got: list[dict[str, Any]] = []
    runner = web.AppRunner(echo_app(fake, got).web_app(path="/slack/events"))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        fake.events_url = f"http://127.0.0.1:{port}/slack/events"
        body = await fake.user_says("over http")
        await fake.wait_reply("D0DM0001", body["event"]["ts"], text="echo: over http")
        assert await fake.post_event(body, secret="wrong") == 401
        assert await fake.post_event(body, ts=int(time.time()) - 600) == 401
        assert await fake.redeliver(body, 1) == 200  # Bolt itself does not dedupe: the gateway must
        await fake.wait_for(lambda: len(got) == 2, 5, what="the retried event")
        assert got[0]["ts"] == got[1]["ts"]
    finally:
        await runner.cleanup()


async def test_chat_streaming_methods(fake_slack: FakeSlack) -> None:
    fake, api = fake_slack, client(fake_slack)
    with pytest.raises(SlackApiError) as no_recipient:
        await api.chat_startStream(channel="C1", thread_ts="1.000001", markdown_text="x")
    assert no_recipient.value.response["error"] == "missing_recipient_user_id"
    started = await api.chat_startStream(channel="C1", thread_ts="1.000001", markdown_text="Hel",
                                         recipient_user_id="U1", recipient_team_id="T1")
    ts = started["ts"]
    await api.chat_appendStream(channel="C1", ts=ts, markdown_text="lo **wor")
    # A streaming message cannot be edited; appending nothing is refused.
    with pytest.raises(SlackApiError) as conflict:
        await api.chat_update(channel="C1", ts=ts, text="other")
    assert conflict.value.response["error"] == "streaming_state_conflict"
    with pytest.raises(SlackApiError) as empty:
        await api.chat_appendStream(channel="C1", ts=ts, markdown_text="")
    assert empty.value.response["error"] == "no_text"
    assert fake.messages[("C1", ts)]["streaming"] is True
    stopped = await api.chat_stopStream(channel="C1", ts=ts, markdown_text="ld**")
    assert stopped["message"]["text"] == "Hello **world**"
    assert fake.versions("C1", ts) == ["Hel", "Hello **wor", "Hello **world**"]
    with pytest.raises(SlackApiError) as over:
        await api.chat_appendStream(channel="C1", ts=ts, markdown_text="more")
    assert over.value.response["error"] == "message_not_in_streaming_state"
    # Once stopped it is an ordinary message again: chat.update takes markdown_text (or text, not both).
    await api.chat_update(channel="C1", ts=ts, markdown_text="Bye")
    with pytest.raises(SlackApiError) as both:
        await api.chat_update(channel="C1", ts=ts, markdown_text="a", text="b")
    assert both.value.response["error"] == "markdown_text_conflict"
    with pytest.raises(SlackApiError) as long:
        await api.chat_update(channel="C1", ts=ts, markdown_text="x" * 12_001)
    assert long.value.response["error"] == "msg_too_long"
    assert fake.versions("C1", ts)[-1] == "Bye"
    # A DM needs no recipient; a stream is always a reply (thread_ts).
    dm = await api.chat_startStream(channel="D1", thread_ts="2.000001")
    assert fake.messages[("D1", dm["ts"])]["text"] == ""
    await api.chat_delete(channel="D1", ts=dm["ts"])
    assert ("D1", dm["ts"]) not in fake.messages
    with pytest.raises(SlackApiError) as gone:
        await api.chat_update(channel="D1", ts=dm["ts"], text="x")
    assert gone.value.response["error"] == "message_not_found"


async def test_user_messages_cannot_be_edited_or_deleted(fake_slack: FakeSlack) -> None:
    ts = fake_slack.next_ts()  # a user's message, as user_says records it
    fake_slack.messages[("D0DM0001", ts)] = {"type": "message", "user": fake_slack.user, "text": "mine", "ts": ts}
    with pytest.raises(SlackApiError) as edit:
        await client(fake_slack).chat_update(channel="D0DM0001", ts=ts, text="x")
    assert edit.value.response["error"] == "cant_update_message"
    with pytest.raises(SlackApiError) as delete:
        await client(fake_slack).chat_delete(channel="D0DM0001", ts=ts)
    assert delete.value.response["error"] == "cant_delete_message"


async def test_workspace_without_streaming_answers_unknown_method() -> None:
    async with FakeSlack(streaming=False) as fake:
        for call in (lambda: client(fake).chat_startStream(channel="D1", thread_ts="1.000001", markdown_text="x"),
                     lambda: client(fake).chat_appendStream(channel="D1", ts="1.000002", markdown_text="x"),
                     lambda: client(fake).chat_stopStream(channel="D1", ts="1.000002")):
            with pytest.raises(SlackApiError) as missing:
                await call()
            assert missing.value.response["error"] == "unknown_method"
        assert not fake.messages


async def test_tiers_answer_429_with_retry_after() -> None:
    async with FakeSlack(rate_limits={**TIER_LIMITS, "chat.update": 2}, rate_window=30) as fake:
        api = client(fake)
        sent = await api.chat_postMessage(channel="C1", text="a")
        for text in ("b", "c"):
            await api.chat_update(channel="C1", ts=sent["ts"], text=text)
        with pytest.raises(SlackApiError) as limited:
            await api.chat_update(channel="C1", ts=sent["ts"], text="d")
        assert limited.value.response.status_code == 429
        assert limited.value.response["error"] == "ratelimited"
        assert 1 <= int(limited.value.response.headers["Retry-After"]) <= 30
        assert fake.versions("C1", sent["ts"]) == ["a", "b", "c"]
        # Other methods count on their own.
        assert (await api.chat_postMessage(channel="C1", text="e"))["ok"]


async def test_shared_files_need_the_bot_token(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    got: list[dict[str, Any]] = []
    handler = AsyncSocketModeHandler(echo_app(fake, got), app_token=APP_TOKEN, ping_interval=0.5)
    await handler.connect_async()
    data = bytes(range(256)) * 600
    try:
        await fake.wait_for(lambda: fake.open_sockets, 5, what="a socket")
        await fake.user_says("", files=[SlackFile("Screen Shot 1.PNG", data, "image/png"),
                                        SlackFile("clip.webm", b"webm", "audio/webm", audio_clip=True)])
        await fake.wait_for(lambda: got, 5, what="the event at the app")
    finally:
        await handler.close_async()
    event = got[0]
    assert event["subtype"] == "file_share" and event["text"] == ""
    image, clip = event["files"]
    assert (image["name"], image["mimetype"], image["filetype"], image["size"]) == (
        "Screen Shot 1.PNG", "image/png", "png", len(data))
    assert image["url_private_download"].endswith("/download/screen_shot_1.png")
    assert (clip["subtype"], clip["duration_ms"]) == ("slack_audio", 4200)
    async with aiohttp.ClientSession() as http:
        for url in (image["url_private"], image["url_private_download"]):
            async with http.get(url, headers={"Authorization": f"Bearer {BOT_TOKEN}"}) as resp:
                assert resp.status == 200 and resp.content_type == "image/png"
                assert resp.content_length == len(data) and await resp.read() == data
        # No token, or another one: Slack's sign-in page, with status 200.
        for headers in ({}, {"Authorization": f"Bearer {APP_TOKEN}"}):
            async with http.get(image["url_private_download"], headers=headers) as resp:
                assert resp.status == 200 and resp.content_type == "text/html"
                assert await resp.read() == LOGIN_PAGE
        unknown = image["url_private"].replace(image["id"], "F0NOPE")
        async with http.get(unknown, headers={"Authorization": f"Bearer {BOT_TOKEN}"}) as resp:
            assert resp.status == 404
    assert [r["authorized"] for r in fake.files.requests] == [True, True, False, False, True]


async def test_files_upload_v2_shares_the_files_as_one_message(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    web_client = client(fake)
    done = await web_client.files_upload_v2(channel="C0CHAN001", thread_ts="1700000000.000001",
                                            file_uploads=[{"content": b"one", "filename": "a.txt"},
                                                          {"content": b"two!", "filename": "b.png"}])
    [message] = [m for m in fake.messages.values() if m.get("files")]
    assert [(f["name"], f["mimetype"], f["size"]) for f in message["files"]] == [("a.txt", "text/plain", 3),
                                                                              ("b.png", "image/png", 4)]
    assert message["thread_ts"] == "1700000000.000001" and message["user"] == BOT_USER
    shares = done["files"][0]["shares"]["public"]["C0CHAN001"]
    assert shares == [{"ts": message["ts"], "thread_ts": "1700000000.000001"}]
    assert [u.data for u in fake.uploads.values()] == [b"one", b"two!"]
    # What the bot shared is served like a user's file, to the bot token only.
    async with aiohttp.ClientSession() as http:
        async with http.get(message["files"][0]["url_private_download"],
                            headers={"Authorization": f"Bearer {BOT_TOKEN}"}) as resp:
            assert await resp.read() == b"one"


async def test_upload_errors_as_slack_documents_them(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    fake.upload_limit = 10
    web_client = client(fake)

    async def error_of(method: str, **params: Any) -> str:
        with pytest.raises(SlackApiError) as failed:
            await web_client.api_call(method, params=params)
        return str(failed.value.response["error"])

    assert await error_of("files.getUploadURLExternal", filename="a", length=0) == "missing_argument"
    assert await error_of("files.getUploadURLExternal", filename="a", length="ten") == "invalid_arguments"
    assert await error_of("files.getUploadURLExternal", filename="a", length=11) == "file_upload_size_restricted"
    assert await error_of("files.completeUploadExternal", files='[{"id": "F0NOPE"}]') == "file_not_found"
    got = await web_client.files_getUploadURLExternal(filename="a.txt", length=3)
    url, file_id = got["upload_url"], got["file_id"]
    # Not uploaded yet: nothing to complete.
    assert await error_of("files.completeUploadExternal", files=f'[{{"id": "{file_id}"}}]') == "file_not_found"
    async with aiohttp.ClientSession() as http:
        async with http.post(url, data=b"four") as resp:
            assert resp.status == 400  # not the declared length
        form = aiohttp.FormData()
        form.add_field("file", b"abc", filename="a.txt")
        async with http.post(url, data=form) as resp:
            assert resp.status == 200 and await resp.text() == "OK - 3"
        async with http.post(url, data=b"abc") as resp:
            assert resp.status == 404  # an upload URL is good once
    # Without channel_id the file stays private: no message.
    done = await web_client.files_completeUploadExternal(files=[{"id": file_id, "title": "a"}])
    assert done["files"][0]["shares"] == {} and not [m for m in fake.messages.values() if m.get("files")]
    assert await error_of("files.completeUploadExternal", files=f'[{{"id": "{file_id}"}}]') == "file_not_found"


async def test_upload_methods_need_files_write() -> None:
    async with FakeSlack(scopes=frozenset({"chat:write", "files:read"})) as fake:
        with pytest.raises(SlackApiError) as refused:
            await client(fake).files_getUploadURLExternal(filename="a.txt", length=3)
    data = refused.value.response.data
    assert isinstance(data, dict)
    assert (data["error"], data["needed"], data["provided"]) == ("missing_scope", "files:write", "chat:write,files:read")


async def test_another_workspace_is_named_everywhere() -> None:
    async with FakeSlack(team_id="T0OTHER99") as fake:
        me = await client(fake).auth_test()
        assert me["team_id"] == "T0OTHER99"
        body = fake.event_body({"type": "message", "user": "U1", "text": "hi", "channel": "D0DM0009"})
        assert body["team_id"] == "T0OTHER99" and body["authorizations"][0]["team_id"] == "T0OTHER99"
