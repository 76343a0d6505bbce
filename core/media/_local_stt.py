"""Speech to text on this machine with faster-whisper (the optional extra ``stt-local``).

The package and its model weights are heavy and optional: faster-whisper is imported
when a ``LocalTranscriber`` is built, and the model (downloaded by faster-whisper on first
use, then cached) is loaded on the first transcription, in a thread. Tests cannot fetch
weights, so only the message for a missing install is tested; the rest is the library's
documented API (``WhisperModel(size, device=, compute_type=).transcribe(file)``).
"""

from __future__ import annotations

import asyncio
import importlib
import io
import threading
from typing import Any

from .errors import TranscriptionError
from .transcribe import NO_SPEECH, Transcript

NOT_INSTALLED = "local speech-to-text needs: pip install 'hermes-gateway[stt-local]'"


class LocalTranscriber:
    """Transcribes with a faster-whisper model (``model_size``: tiny, base, small, medium, large-v3)."""

    def __init__(self, model_size: str = "base", device: str = "cpu", compute_type: str = "int8") -> None:
        try:
            self._library: Any = importlib.import_module("faster_whisper")
        except ImportError as exc:
            raise TranscriptionError(NOT_INSTALLED) from exc
        self._model_size = model_size
        self._device = device
        self._compute_type = compute_type
        self._model: Any = None
        self._load_lock = threading.Lock()
        # One transcription at a time: each already uses every core it is given.
        self._busy = asyncio.Lock()

    async def aclose(self) -> None:
        """Nothing to close (the model is freed with the object); here so both transcribers close alike."""

    async def transcribe(self, data: bytes, *, mime: str, name: str) -> Transcript:
        """The transcript of ``data``; ``mime`` and ``name`` are not needed (the decoder sniffs)."""
        async with self._busy:
            return await asyncio.to_thread(self._transcribe, data)

    def _transcribe(self, data: bytes) -> Transcript:
        try:
            model = self._loaded()
            segments, info = model.transcribe(io.BytesIO(data))
            text = " ".join("".join(segment.text for segment in segments).split())
        except TranscriptionError:
            raise
        except Exception as exc:  # the decoder and the model fail in many ways on a bad file
            raise TranscriptionError("local speech-to-text could not read that recording") from exc
        if not text:
            raise TranscriptionError(NO_SPEECH)
        language = getattr(info, "language", None)
        duration = getattr(info, "duration", None)
        return Transcript(text, float(duration) if duration is not None else None,
                          language if isinstance(language, str) else None)

    def _loaded(self) -> Any:
        with self._load_lock:
            if self._model is None:
                try:
                    self._model = self._library.WhisperModel(
                        self._model_size, device=self._device, compute_type=self._compute_type)
                except Exception as exc:  # no weights, no network, unknown size, ...
                    raise TranscriptionError(
                        f"the local speech-to-text model '{self._model_size}' could not be loaded") from exc
            return self._model
