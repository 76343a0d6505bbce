"""deploy/compose.yaml, read as YAML: no Docker engine runs where the tests run, so this checks
the file's shape (services, what waits for what, health checks, the shared files), not a
running stack."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from gateway.config import Settings

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
NODES = ("node1", "node2", "node3")


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_postgres_three_nodes_and_a_proxy_each_with_a_health_check() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", *NODES, "proxy"}
    for name, service in services.items():
        check = service.get("healthcheck")
        assert check and check["test"], f"{name} has no health check"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])


def test_nodes_wait_for_a_healthy_database_and_the_proxy_for_healthy_nodes() -> None:
    services = _compose()["services"]
    for node in NODES:
        assert services[node]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
        assert "/readyz" in " ".join(services[node]["healthcheck"]["test"])
    assert services["proxy"]["depends_on"] == {n: {"condition": "service_healthy"} for n in NODES}


def test_every_node_has_the_same_config_env_and_database_and_a_home_of_its_own() -> None:
    services = _compose()["services"]
    homes = set()
    for node in NODES:
        service = services[node]
        volumes = service["volumes"]
        assert "./config.yaml:/data/config.yaml:ro" in volumes and "./.env:/data/.env:ro" in volumes
        assert "media:/data/media" in volumes
        home = [v for v in volumes if v.endswith(":/data")]
        assert len(home) == 1
        homes.add(home[0])
        url = service["environment"]["HERMES_STORAGE_URL"]
        assert url.startswith("postgresql://") and "${HERMES_PG_PASSWORD" in url  # never a password in the file
        assert service["environment"]["API_SERVER_HOST"] == "0.0.0.0"  # needs API_SERVER_KEY (.env)
    assert len(homes) == len(NODES)
    assert set(_compose()["volumes"]) >= {"pgdata", "media", *(h.split(":")[0] for h in homes)}


def test_the_proxy_sends_to_every_node_and_listens_on_loopback() -> None:
    conf = (DEPLOY / "nginx.conf").read_text(encoding="utf-8")
    assert set(re.findall(r"server (node\d):8642", conf)) == set(NODES)
    assert _compose()["services"]["proxy"]["ports"] == ["127.0.0.1:8642:80"]
    assert "./nginx.conf:/etc/nginx/nginx.conf:ro" in _compose()["services"]["proxy"]["volumes"]


def test_the_shipped_config_yaml_is_valid_and_env_example_has_the_secrets_named() -> None:
    Settings.model_validate(yaml.safe_load((DEPLOY / "config.yaml").read_text(encoding="utf-8")))
    example = (DEPLOY / "env.example").read_text(encoding="utf-8")
    for name in ("HERMES_PG_PASSWORD", "API_SERVER_KEY", "HERMES_PAIRING_KEY"):
        assert re.search(rf"^{name}=", example, re.M)
    assert (DEPLOY / ".gitignore").read_text().split() == [".env"]
