"""The daemon's HTTP server and its own routes: ``server`` (listening, with its limits), ``health``
(/healthz, /readyz, /metrics) and ``fds`` (file descriptors against their limit). The API server's
routes come from its adapter, ``adapters.api_server``."""

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
