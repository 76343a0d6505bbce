"""The daemon's HTTP server and its own routes: ``server`` (listening, with its limits), ``health``
(/healthz, /readyz, /metrics) and ``fds`` (file descriptors against their limit). The API server's
routes come from its adapter, ``adapters.api_server``.

Its names load on first use (``storage.lazy``): ``doctor`` counts file descriptors without
loading aiohttp's server.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

if TYPE_CHECKING:
    from gateway.http.fds import LOW_HEADROOM, FdUsage, fd_usage, open_file_limit
    from gateway.http.health import HealthSource, add_health_routes
    from gateway.http.server import HttpServer, connection_cap, start_http_server

__all__ = [
    "LOW_HEADROOM",
    "FdUsage",
    "HealthSource",
    "HttpServer",
    "add_health_routes",
    "connection_cap",
    "fd_usage",
    "open_file_limit",
    "start_http_server",
]

_WHERE = {
    "FdUsage": "gateway.http.fds",
    "HealthSource": "gateway.http.health",
    "HttpServer": "gateway.http.server",
    "LOW_HEADROOM": "gateway.http.fds",
    "add_health_routes": "gateway.http.health",
    "connection_cap": "gateway.http.server",
    "fd_usage": "gateway.http.fds",
    "open_file_limit": "gateway.http.fds",
    "start_http_server": "gateway.http.server",
}

__getattr__ = lazy_names(__name__, _WHERE)
