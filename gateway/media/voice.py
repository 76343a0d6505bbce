"""Voice replies: a voice message is answered with a voice note too (``tts.reply_to_voice``).

The answer's text is spoken by an OpenAI-compatible ``/audio/speech`` endpoint
as OGG/Opus (what Telegram plays as a voice note) and joins the answer's files.
The text still goes out: the voice note is a companion, so a failed synthesis
costs nothing but itself (it is logged). The ledger row written with the answer
is told about the new file, so a crash before it went out sends it after the
restart like any other file.
"""

from __future__ import annotations

import structlog

from adapters.media import AttachmentKind
from core.media import synthesize
from gateway.config import TtsConfig
from storage import Store

from .links import note_files
from .outbox import TurnFiles

log = structlog.get_logger("hermes.media")

__all__ = ["speak_answer"]


async def speak_answer(settings: TtsConfig, text: str, files: TurnFiles, *, store: Store,
                       ledger_id: int | None) -> bool:
    """Add the spoken ``text`` to ``files``; True when it was."""
    if not settings.reply_to_voice or not settings.base_url or not text.strip():
        return False
    try:
        audio = await synthesize(text, base_url=settings.base_url, model=settings.model, voice=settings.voice,
                                 api_key=settings.api_key.get_secret_value() if settings.api_key else None,
                                 timeout=settings.timeout)
        await files.add_bytes(audio, "answer.ogg", kind=AttachmentKind.VOICE)
    except Exception as exc:  # SpeechError, a full disk, anything: the text answer goes out regardless
        log.warning("media.voice_reply_failed", error_type=type(exc).__name__, error=str(exc)[:200])
        return False
    await note_files(store, ledger_id, files)
    return True
