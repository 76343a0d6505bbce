"""Real-network stand-ins for outside services (model providers, ...), for tests."""

from .openai_server import FakeOpenAI, RecordedRequest, Responder, echo_last_user_message

__all__ = ["FakeOpenAI", "RecordedRequest", "Responder", "echo_last_user_message"]
