"""``synthesize`` against the fake OpenAI server's speech endpoint, over a real socket."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from core.media import MAX_SPEECH_INPUT, SpeechError, sniff, speech_input, synthesize
from tests.fakes import FakeOpenAI

KEY = "sk-test-0123456789abcdef"


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key=KEY) as fake:
        yield fake


async def speak(server: FakeOpenAI | str, text: str = "Your train leaves at nine.", **kw: Any) -> bytes:
    settings: dict[str, Any] = {"base_url": server if isinstance(server, str) else server.base_url,
                                "model": "tts-1", "voice": "alloy", "api_key": KEY, "timeout": 10.0}
    return await synthesize(text, **{**settings, **kw})


async def test_text_comes_back_as_a_voice_note(server: FakeOpenAI) -> None:
    audio = await speak(server)
    # A real OGG/Opus file, as Telegram's sendVoice takes it.
    assert sniff(audio).mime == "audio/ogg" and audio[28:36] == b"OpusHead"
    [request] = server.speech.requests
    assert request.body == {"model": "tts-1", "input": "Your train leaves at nine.", "voice": "alloy",
                            "response_format": "opus"}
    assert request.headers["Authorization"] == f"Bearer {KEY}"


async def test_another_format(server: FakeOpenAI) -> None:
    audio = await speak(server, response_format="wav")
    assert audio.startswith(b"RIFF") and server.speech.requests[0].body["response_format"] == "wav"


async def test_a_long_text_is_cut_at_a_sentence_end(server: FakeOpenAI) -> None:
    sentence = "The quick brown fox jumps over the lazy dog. "
    text = sentence * 120  # 5400 characters: more than the endpoint takes
    await speak(server, text)
    spoken = server.speech.requests[0].body["input"]
    assert len(spoken) <= MAX_SPEECH_INPUT and spoken.endswith("dog.") and text.startswith(spoken)
    assert len(spoken) > MAX_SPEECH_INPUT - len(sentence)


def test_speech_input() -> None:
    assert speech_input("  Hello there.  ") == "Hello there."
    words = "word " * 1000  # no sentence end: cut after a word
    assert speech_input(words) == ("word " * 819).strip()
    assert speech_input("x" * 5000) == "x" * 4096  # one endless word: cut where it must be
    # A sentence end too early to keep half the text is not where it is cut.
    assert speech_input("Hi. " + "y " * 3000) == ("Hi. " + "y " * 2046).rstrip()
    assert speech_input("Tschüss! Äh… " * 400).endswith(("!", "…"))


async def test_nothing_to_say_is_an_error(server: FakeOpenAI) -> None:
    with pytest.raises(SpeechError, match="no text"):
        await speak(server, " \n ")
    assert server.speech.requests == []


async def test_a_refused_key_is_not_repeated(server: FakeOpenAI) -> None:
    with pytest.raises(SpeechError) as refused:
        await speak(server, api_key="sk-wrong-key-000000")
    assert "401" in str(refused.value) and "sk-wrong" not in str(refused.value)


async def test_a_server_error_quoting_the_key_is_scrubbed(server: FakeOpenAI) -> None:
    server.speech.fail(500, f"boom while using {KEY}")
    with pytest.raises(SpeechError) as failed:
        await speak(server)
    assert "500" in str(failed.value) and "boom" in str(failed.value) and KEY not in str(failed.value)


async def test_an_answer_that_is_no_audio_is_an_error(server: FakeOpenAI) -> None:
    server.speech.reply(b"<html>proxy login</html>", "text/html")
    with pytest.raises(SpeechError, match="not opus audio"):
        await speak(server)
    server.speech.reply(b"")
    with pytest.raises(SpeechError, match="no audio"):
        await speak(server)


async def test_an_endless_answer_is_cut_off(server: FakeOpenAI) -> None:
    server.speech.reply(b"OggS" + bytes(26 * 1024 * 1024))
    with pytest.raises(SpeechError, match="more than 25 MB"):
        await speak(server)


async def test_a_refused_request_says_why(server: FakeOpenAI) -> None:
    with pytest.raises(SpeechError, match=r"400.*Missing required parameter: 'voice'"):
        await speak(server, voice="")


async def test_a_silent_server_times_out(server: FakeOpenAI) -> None:
    server.speech.hang()
    with pytest.raises(SpeechError, match=r"timed out after 0\.2 s"):
        await speak(server, timeout=0.2)


async def test_an_unreachable_server_is_named_by_its_host_only() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(SpeechError) as failed:
        await speak(f"http://127.0.0.1:{port}/secret-path/v1")
    assert "127.0.0.1" in str(failed.value) and "secret-path" not in str(failed.value)
