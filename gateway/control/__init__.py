"""The local control socket (``$HERMES_HOME/gateway.sock``): the daemon's server, and the client
the command line and the terminal chat use.

The server's names load on first use: a command-line call needs only the client, and the
server would bring every platform's library with it (a second of start-up per command)."""

from typing import TYPE_CHECKING

from gateway.control.client import ChatConnection, call, call_sync, socket_path
from storage.lazy import lazy_names

if TYPE_CHECKING:
    from gateway.control.server import ControlServer, GatewayView, gateway_status

__all__ = ["ChatConnection", "ControlServer", "GatewayView", "call", "call_sync", "gateway_status", "socket_path"]

_WHERE = dict.fromkeys(("ControlServer", "GatewayView", "gateway_status"), "gateway.control.server")

__getattr__ = lazy_names(__name__, _WHERE)
