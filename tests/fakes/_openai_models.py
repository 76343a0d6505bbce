"""The models ``FakeOpenAI`` serves: ``GET /v1/models`` lists them, and a chat request for another
gets what OpenAI answers for it: 404 with ``{"error": {"message": "The model `x` does not exist or
you do not have access to it.", "type": "invalid_request_error", "param": null, "code":
"model_not_found"}}``. ``served`` None: every name is served (the default: tests that do not care)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from aiohttp import web

__all__ = ["model_list", "unknown_model"]


def model_list(served: Collection[str] | None, default: str) -> dict[str, Any]:
    names = sorted(served) if served is not None else [default]
    return {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names]}


def unknown_model(served: Collection[str] | None, body: Any) -> web.Response | None:
    """The refusal of a chat request whose ``model`` is not served; None when it is."""
    if served is None or not isinstance(body, dict):
        return None
    model = body.get("model")
    if isinstance(model, str) and model in served:
        return None
    error = {"message": f"The model `{model}` does not exist or you do not have access to it.",
             "type": "invalid_request_error", "param": None, "code": "model_not_found"}
    return web.json_response({"error": error}, status=404)
