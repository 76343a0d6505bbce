"""The daemon's own state, as /readyz, ``status`` and ``gateway.state.json`` report it.

Its names load on first use (``storage.lazy``): the command line reads the state file without
loading what a live snapshot needs.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

if TYPE_CHECKING:
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

_WHERE = {
    "AdapterReadiness": "gateway.status.snapshot",
    "READINESS_STATES": "gateway.status.snapshot",
    "STATE_FILE": "gateway.status.snapshot",
    "SnapshotSource": "gateway.status.snapshot",
    "adapter_readiness": "gateway.status.snapshot",
    "adapters_readiness": "gateway.status.snapshot",
    "last_error": "gateway.status.snapshot",
    "read_state_file": "gateway.status.snapshot",
    "status_snapshot": "gateway.status.snapshot",
}

__getattr__ = lazy_names(__name__, _WHERE)
