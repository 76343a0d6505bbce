"""Real-network stand-ins for outside services (model providers, ...), for tests."""

from ._openai_audio import FakeTranscriptions, TranscriptionRequest
from ._openai_stream import StreamRecord
from .openai_server import FakeOpenAI, RecordedRequest, Responder, echo_last_user_message

__all__ = [
    "FakeOpenAI",
    "FakeTranscriptions",
    "RecordedRequest",
    "Responder",
    "StreamRecord",
    "TranscriptionRequest",
    "echo_last_user_message",
]
