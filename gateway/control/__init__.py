"""The local control socket (``$HERMES_HOME/gateway.sock``): the daemon's server, and the client
the command line and the terminal chat use."""

from gateway.control.client import ChatConnection, call, call_sync, socket_path
from gateway.control.server import ControlServer, GatewayView, gateway_status

__all__ = ["ChatConnection", "ControlServer", "GatewayView", "call", "call_sync", "gateway_status", "socket_path"]
