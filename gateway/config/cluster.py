"""``cluster`` in config.yaml: several nodes over one PostgreSQL database (README, "Running
several nodes"). Read only with ``storage.url: postgresql://…``; a SQLite daemon is alone.

Every node of a cluster should have the same ``failover_s`` and ``heartbeat_s`` (the same
config.yaml): a lease taken for ``failover_s`` is renewed every ``heartbeat_s`` by its holder.
"""

from __future__ import annotations

import os
import socket

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["ClusterConfig"]


class ClusterConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: this node's name in `status` and in the leases it holds; unset: `<hostname>:<pid>`
    #: (unique however many nodes run, and new at each start)
    node_id: str | None = Field(default=None, min_length=1, max_length=200)
    #: a role (Telegram polling, a Discord shard, Slack Socket Mode, the scheduler) or a chat
    #: whose node died is taken over by another node this many seconds after its last heartbeat
    failover_s: float = Field(default=10.0, ge=1.0, le=600.0)
    #: how often a node renews its leases; unset: failover_s / 3 (it must be at most half of
    #: failover_s, so one late heartbeat does not lose them)
    heartbeat_s: float | None = Field(default=None, gt=0)

    @field_validator("node_id")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None and (value != value.strip() or not value.isprintable()):
            raise ValueError("node_id must be printable, without spaces at either end")
        return value

    @model_validator(mode="after")
    def _heartbeat_within_failover(self) -> ClusterConfig:
        if self.heartbeat_s is not None and self.heartbeat_s > self.failover_s / 2:
            raise ValueError(
                f"cluster.heartbeat_s ({self.heartbeat_s:g}) must be at most half of cluster.failover_s "
                f"({self.failover_s:g}): leases would lapse between two heartbeats"
            )
        return self

    @property
    def heartbeat(self) -> float:
        """Seconds between two heartbeats."""
        return self.heartbeat_s if self.heartbeat_s is not None else self.failover_s / 3

    def effective_node_id(self) -> str:
        return self.node_id or f"{socket.gethostname()}:{os.getpid()}"
