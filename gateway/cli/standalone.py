"""``hermes-gateway chat --standalone``: the daemon in this process (terminal chat only, under
the writer lock) for when none runs. The process is the chat's: Ctrl-C and SIGTERM leave the chat
first (stopping a reply being written), and only then is the in-process daemon stopped, with no
connection left open, so leaving never shows a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from gateway.cli.chat_loop import ChatSignals, run_chat
from gateway.config import load_config
from gateway.control.client import ControlError, DaemonNotRunningError, call
from gateway.errors import ConfigError, DaemonRunningError
from storage.errors import GatewayError

if TYPE_CHECKING:
    from gateway.daemon.runner import Gateway

__all__ = ["DaemonRunningError", "quiet_logging", "run_standalone"]

_START_TIMEOUT = 60.0
_CHAT_CLOSE_TIMEOUT = 5.0


async def run_standalone(home: Path, *, resume: str | None = None, continue_last: bool = False,
                         out: TextIO | None = None, err: TextIO | None = None, stream: bool = True) -> int:
    """Start the daemon in this process (terminal chat only), chat, stop it."""
    from gateway.daemon.runner import Gateway  # the daemon's imports only when it runs here

    with contextlib.suppress(DaemonNotRunningError):
        pong = await call(home, "ping", reply_within=5)
        raise DaemonRunningError(pong.get("pid"))
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_quiet_cancelled)
    gateway = Gateway(load_config(home), standalone=True, handle_signals=False)
    signals = ChatSignals(err or sys.stderr)
    task = asyncio.create_task(gateway.run(), name="standalone-gateway")
    try:
        deadline = loop.time() + _START_TIMEOUT
        while True:
            if signals.before_chat is not None:
                return signals.before_chat
            if task.done():
                task.result()  # raises why it could not start
                raise GatewayError("the in-process gateway stopped while starting")
            with contextlib.suppress(DaemonNotRunningError, ControlError):
                await call(home, "ping", reply_within=5)
                break
            if loop.time() > deadline:
                raise GatewayError(f"the in-process gateway did not start within {_START_TIMEOUT:g}s")
            await asyncio.sleep(0.05)
        code = await run_chat(home, resume=resume, continue_last=continue_last, out=out, err=err,
                              signals=signals, stream=stream)
        await _chat_closed(gateway)
        return code
    finally:
        signals.chat_over()
        gateway.request_stop()
        with contextlib.suppress(Exception):
            await task
        signals.remove()


async def _chat_closed(gateway: Gateway) -> None:
    """Until the in-process daemon has closed the chat on its side (forgetting a title queued in
    it): stopping it sooner would cancel that write, and the connection, halfway."""
    from adapters.cli import CliAdapter

    cli = gateway.services.adapters.get("cli") if gateway.services is not None else None
    if not isinstance(cli, CliAdapter):
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _CHAT_CLOSE_TIMEOUT
    # Polled: the adapter has no event for it, and this is the last step of the chat.
    while loop.time() < deadline:
        if not cli.open_chats:
            return
        await asyncio.sleep(0.01)


def _quiet_cancelled(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    # Python 3.11's start_server reports a connection task that ends cancelled as an error with a
    # traceback (3.12 does not: CPython gh-113538). A cancellation is never a failure: say nothing.
    if isinstance(context.get("exception"), asyncio.CancelledError):
        return
    loop.default_exception_handler(context)


def quiet_logging(home: Path) -> None:
    """In standalone mode the daemon's log (its warnings and errors) goes to stderr: on stdout it
    would mix with the chat."""
    from gateway.logs import configure_logging

    try:
        fmt = load_config(home).settings.logging.format
    except ConfigError:
        fmt = "auto"
    configure_logging("warning", fmt, stream=sys.stderr)
