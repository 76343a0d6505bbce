"""The daemon's HTTP server: health, readiness and metrics routes (the API server's routes come from
its adapter, ``adapters.api_server``)."""

from gateway.http.health import HealthSource, add_health_routes

__all__ = ["HealthSource", "add_health_routes"]
