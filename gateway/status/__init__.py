"""The daemon's own state, as /readyz, ``status`` and ``gateway.state.json`` report it."""

from gateway.status.snapshot import (
    READINESS_STATES,
    STATE_FILE,
    AdapterReadiness,
    SnapshotSource,
    adapter_readiness,
    adapters_readiness,
    last_error,
    read_state_file,
    status_snapshot,
)

__all__ = [
    "READINESS_STATES",
    "STATE_FILE",
    "AdapterReadiness",
    "SnapshotSource",
    "adapter_readiness",
    "adapters_readiness",
    "last_error",
    "read_state_file",
    "status_snapshot",
]
