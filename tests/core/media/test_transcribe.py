"""HttpTranscriber against the fake OpenAI server's transcription endpoint, over a real socket."""

from __future__ import annotations

import socket
import sys
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from core.media import HttpTranscriber, LocalTranscriber, Transcript, TranscriptionError
from tests.fakes import FakeOpenAI

from ._samples import wav

KEY = "sk-test-0123456789abcdef"


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key=KEY) as fake:
        yield fake


def _transcriber(server: FakeOpenAI, *, api_key: str | None = KEY, timeout: float = 10.0) -> HttpTranscriber:
    return HttpTranscriber(server.base_url, "whisper-1", api_key, timeout)


async def test_a_recording_is_sent_as_a_form_and_its_transcript_read(server: FakeOpenAI) -> None:
    audio = wav()
    server.transcriptions.reply("Buy oat milk on the way home.", duration=0.5, language="english")
    async with _transcriber(server) as stt:
        got = await stt.transcribe(audio, mime="audio/x-wav", name="../../.hermes/.env")

    assert got == Transcript("Buy oat milk on the way home.", 0.5, "english")
    [request] = server.transcriptions.requests
    assert request.fields == {"model": "whisper-1", "response_format": "verbose_json"}
    assert request.file == audio
    # The endpoint is told the type by the name's extension; the sender's name never leaves.
    assert (request.file_name, request.file_type) == ("audio.wav", "audio/x-wav")
    assert request.headers["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(
    ("mime", "name", "sent"),
    [
        ("audio/ogg", "voice.oga", "audio.ogg"),  # Telegram's voice notes: OpenAI refuses .oga
        ("audio/mpeg", "x", "audio.mp3"),
        ("video/mp4", "note.mp4", "audio.mp4"),
        ("application/octet-stream", "memo.M4A", "audio.m4a"),
        ("application/octet-stream", "../../x/.env", "audio.bin"),
    ],
)
async def test_the_upload_name_follows_the_type(server: FakeOpenAI, mime: str, name: str, sent: str) -> None:
    async with _transcriber(server) as stt:
        got = await stt.transcribe(b"OggS" + bytes(100), mime=mime, name=name)
    assert got.text == f"transcript of {sent} (104 bytes)"
    assert server.transcriptions.requests[-1].file_name == sent


async def test_a_server_without_verbose_json_is_asked_for_plain_json(server: FakeOpenAI) -> None:
    server.transcriptions.refuse_verbose = True
    server.transcriptions.reply("hello there")
    async with _transcriber(server) as stt:
        got = await stt.transcribe(wav(), mime="audio/x-wav", name="a.wav")
    assert got == Transcript("hello there", None, None)
    assert [r.fields["response_format"] for r in server.transcriptions.requests] == ["verbose_json", "json"]


async def test_a_recording_without_speech_says_so(server: FakeOpenAI) -> None:
    server.transcriptions.reply("  \n ")
    async with _transcriber(server) as stt:
        with pytest.raises(TranscriptionError, match=r"^no speech was found in that recording$"):
            await stt.transcribe(wav(), mime="audio/x-wav", name="a.wav")


async def test_a_refused_key_is_not_repeated_in_the_error(server: FakeOpenAI) -> None:
    wrong = "sk-wrong-key-must-not-leak"
    async with _transcriber(server, api_key=wrong) as stt:
        with pytest.raises(TranscriptionError) as caught:
            await stt.transcribe(wav(), mime="audio/x-wav", name="a.wav")
    message = str(caught.value)
    assert "HTTP 401 (the API key was refused)" in message and wrong not in message


async def test_a_server_error_quoting_the_key_is_scrubbed(server: FakeOpenAI) -> None:
    server.transcriptions.fail(500, f"upstream choked on request with key {KEY}")
    async with _transcriber(server) as stt:
        with pytest.raises(TranscriptionError) as caught:
            await stt.transcribe(wav(), mime="audio/x-wav", name="a.wav")
    message = str(caught.value)
    assert message.startswith("speech-to-text failed: the service answered HTTP 500: upstream choked")
    assert KEY not in message and "***" in message


async def test_a_file_over_the_endpoints_cap_gets_its_413(server: FakeOpenAI) -> None:
    async with _transcriber(server) as stt:
        with pytest.raises(TranscriptionError, match=r"HTTP 413 \(the file is too large for it\)"):
            await stt.transcribe(bytes(25 * 1024 * 1024 + 1), mime="audio/x-wav", name="a.wav")


@pytest.mark.parametrize(
    "body",
    ["<html>gateway error</html>", {"transcript": "wrong field"}, ["a", "list"]],
)
async def test_an_answer_without_a_transcript_is_an_error(server: FakeOpenAI, body: object) -> None:
    server.transcriptions.respond(200, body)
    async with _transcriber(server) as stt:
        with pytest.raises(TranscriptionError, match="speech-to-text sent back an answer"):
            await stt.transcribe(wav(), mime="audio/x-wav", name="a.wav")


async def test_a_bad_request_is_an_error(server: FakeOpenAI) -> None:
    server.transcriptions.fail(400, "Invalid file format.")
    async with _transcriber(server) as stt:
        with pytest.raises(TranscriptionError, match="HTTP 400: Invalid file format"):
            await stt.transcribe(wav(), mime="audio/x-wav", name="a.wav")
    assert len(server.transcriptions.requests) == 1


async def test_a_silent_server_times_out(server: FakeOpenAI) -> None:
    server.transcriptions.hang()
    async with _transcriber(server, timeout=0.2) as stt:
        with pytest.raises(TranscriptionError, match=r"^speech-to-text timed out after 0.2 s$"):
            await stt.transcribe(wav(), mime="audio/x-wav", name="a.wav")


async def test_an_unreachable_server_is_named_by_its_host_only() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    stt = HttpTranscriber(f"http://user:pw@127.0.0.1:{port}/v1?token=abc", "whisper-1", KEY, 5.0)
    async with stt:
        with pytest.raises(TranscriptionError) as caught:
            await stt.transcribe(wav(), mime="audio/x-wav", name="a.wav")
    assert str(caught.value) == "speech-to-text could not be reached at 127.0.0.1"


def test_local_stt_without_its_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # faster-whisper is an optional extra; None in sys.modules makes its import fail as if absent.
    monkeypatch.setitem(sys.modules, "faster_whisper", None)
    with pytest.raises(TranscriptionError, match=r"^local speech-to-text needs: pip install 'hermes-gateway\[stt-local\]'$"):
        LocalTranscriber()
