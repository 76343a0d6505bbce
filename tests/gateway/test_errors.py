"""The one exception tree: every error class of the four packages hangs off GatewayError, is
exported by gateway.errors and drawn in its docstring, and ``describe`` maps each to what a
person sees without ever showing the text of an error outside the tree."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import adapters
import core
import gateway
import storage
from adapters.base import ReplyError
from gateway import errors
from gateway.errors import (
    EX_CONFIG,
    ConfigError,
    GatewayError,
    LaneFullError,
    ModelNotConfiguredError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
    SessionNotFoundError,
    describe,
)


def _all_error_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for package in (gateway, adapters, core, storage):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for _, obj in inspect.getmembers(module, inspect.isclass):
                if issubclass(obj, BaseException) and obj.__module__ == info.name:
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def _internal(cls: type[BaseException]) -> bool:
    """Control flow inside one module (``_Stalled``), or a class of a private module that its
    package does not export: it never reaches a caller outside its package."""
    if cls.__name__.startswith("_"):
        return True
    package, _, module = cls.__module__.rpartition(".")
    return module.startswith("_") and getattr(importlib.import_module(package), cls.__name__, None) is not cls


def test_every_error_of_ours_hangs_off_the_one_root() -> None:
    classes = _all_error_classes()
    assert len(classes) > 30
    outside = [f"{c.__module__}.{c.__qualname__}" for c in classes
               if not issubclass(c, GatewayError) and not c.__name__.startswith("_")]
    assert outside == []


def test_every_public_error_is_exported_and_drawn() -> None:
    public = [c for c in _all_error_classes() if not _internal(c)]
    doc = errors.__doc__ or ""
    assert [c.__name__ for c in public if getattr(errors, c.__name__, None) is not c] == []
    assert [c.__name__ for c in public if c.__name__ not in doc] == []


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (ConfigError("platforms.telegram.token is missing"), 503, EX_CONFIG),
        (LaneFullError("100 waiting"), 429, 75),
        (ModelTimeoutError("http://127.0.0.1:1/v1", 2, 30.0), 504, 75),
        (SessionNotFoundError("no such session"), 404, 1),
    ],
)
def test_describe_maps_status_and_exit_code(exc: GatewayError, status: int, code: int) -> None:
    view = describe(exc)
    assert (view.http_status, view.exit_code) == (status, code)
    assert view.reply == f"⚠️ {exc}"


def test_a_missing_model_is_said_plainly() -> None:
    exc = ModelNotConfiguredError(missing=["model.base_url"])
    assert describe(exc).reply == str(exc)


def test_an_error_outside_the_tree_never_shows_its_text() -> None:
    view = describe(RuntimeError("ContentLengthError: secret internals at 0xdeadbeef"))
    assert "secret internals" not in view.reply and "RuntimeError" in view.reply
    assert (view.http_status, view.error_type) == (500, "server_error")


def test_describe_gives_the_openai_type_code_and_retry_after() -> None:
    busy = describe(LaneFullError("3 messages already wait"))
    assert (busy.http_status, busy.error_type, busy.error_code, busy.retry_after) == (
        429, "rate_limit_error", "queue_full", 5.0)
    limited = describe(ModelRateLimitError("http://127.0.0.1:1/v1", 1, retry_after=7.0))
    assert (limited.http_status, limited.error_code, limited.retry_after) == (429, "rate_limit_exceeded", 7.0)
    view = describe(ModelTimeoutError("http://127.0.0.1:1/v1", 2, 30.0))
    assert (view.error_type, view.error_code, view.retry_after) == ("server_error", "upstream_timeout", None)
    assert view.reply_error() == ReplyError(504, "server_error", "upstream_timeout", None)


def test_a_broken_connection_is_described_without_the_librarys_text() -> None:
    """The model client quotes the connection library in its reason (for the log); the person
    is told what happened in our words."""
    exc = ModelUnavailableError("http://127.0.0.1:1/v1", 1,
                                reason="Response payload is not completed: <ContentLengthError: 400>")
    view = describe(exc)
    assert "ContentLengthError" in str(exc)
    assert "ContentLengthError" not in view.reply and "payload" not in view.reply
    assert view.reply.startswith("⚠️ The model endpoint http://127.0.0.1:1/v1 could not be reached")
    assert (view.http_status, view.error_code) == (502, "upstream_error")
