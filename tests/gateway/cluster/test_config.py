"""``cluster:`` in config.yaml: defaults, bounds, and the clear error of a bad value."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import yaml

from gateway.config import ClusterConfig, ConfigError, load_config


def _load(tmp_path: Path, cluster: object) -> ClusterConfig:
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"cluster": cluster}), encoding="utf-8")
    return load_config(tmp_path, environ={}).settings.cluster


def test_defaults(tmp_path: Path) -> None:
    c = load_config(tmp_path, environ={}).settings.cluster
    assert (c.node_id, c.failover_s, c.heartbeat_s) == (None, 10.0, None)
    assert c.heartbeat == pytest.approx(10 / 3)
    assert c.effective_node_id() == f"{socket.gethostname()}:{os.getpid()}"


def test_values_from_config_yaml(tmp_path: Path) -> None:
    c = _load(tmp_path, {"node_id": "eu-1", "failover_s": 20, "heartbeat_s": 5})
    assert (c.effective_node_id(), c.failover_s, c.heartbeat) == ("eu-1", 20.0, 5.0)


@pytest.mark.parametrize(
    ("cluster", "words"),
    [
        ({"failover_s": 0.5}, "cluster.failover_s"),
        ({"failover_s": 10, "heartbeat_s": 6}, "at most half of cluster.failover_s"),
        ({"heartbeat_s": 0}, "cluster.heartbeat_s"),
        ({"node_id": ""}, "cluster.node_id"),
        ({"node_id": " a"}, "printable"),
        ({"node_id": "a\tb"}, "printable"),
        ({"failover": 10}, "cluster.failover"),
    ],
)
def test_bad_values_are_refused_clearly(tmp_path: Path, cluster: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, cluster)
    assert words in str(caught.value)
