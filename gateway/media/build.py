"""The media room's parts, built once from the validated config."""

from __future__ import annotations

import structlog

from core.media import HttpTranscriber, LocalTranscriber, Transcriber, Transcript, TranscriptionError
from gateway.config import LoadedConfig
from storage import MediaStore, Store

from ._kinds import Kinds, VisionSettings
from .intake import MediaIntake
from .pruner import MediaPruner
from .recall import ImageRecall

log = structlog.get_logger("hermes.media")

__all__ = ["build_media"]


class _Unavailable:
    """A transcriber that could not be made (the local extra is missing): each voice note says why."""

    def __init__(self, reason: str) -> None:
        self._reason = reason

    async def transcribe(self, data: bytes, *, mime: str, name: str) -> Transcript:
        raise TranscriptionError(self._reason)


def _transcriber(config: LoadedConfig) -> Transcriber | None:
    stt = config.settings.stt
    provider = stt.active
    if provider == "none":
        return None
    if provider == "local":
        try:
            return LocalTranscriber(stt.local_model)
        except TranscriptionError as exc:
            log.warning("media.stt_unavailable", provider="local", error=str(exc))
            return _Unavailable(str(exc))
    if not stt.base_url:
        log.warning("media.stt_unavailable", provider="openai", error="stt.base_url is not set")
        return _Unavailable("speech-to-text is set to openai, but stt.base_url is not set")
    return HttpTranscriber(stt.base_url, stt.model, stt.api_key.get_secret_value() if stt.api_key else None,
                           stt.timeout)


def build_media(config: LoadedConfig, store: Store, blobs: MediaStore) -> MediaIntake:
    """The media room over ``blobs``, the daemon's one store of files (delivery shares it)."""
    settings = config.settings
    model = settings.model
    vision = VisionSettings(enabled=model.vision, auxiliary=model.vision_auxiliary, base_url=model.base_url,
                            api_key=model.api_key.get_secret_value() if model.api_key else None,
                            timeout=model.timeout)
    kinds = Kinds(blobs, image_max_px=settings.media.image_max_px, max_inline_bytes=settings.media.max_inline_kb * 1024,
                  pdf_max_pages=settings.media.pdf_max_pages, vision=vision, transcriber=_transcriber(config))
    return MediaIntake(blobs, settings.media, kinds=kinds, recall=ImageRecall(store, blobs),
                       pruner=MediaPruner(store, blobs, settings.media))
