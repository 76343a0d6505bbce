"""A person's data: /export-my-data and /forget-me (and ``hermes-gateway users export|forget``).

- ``export``: the export file, JSON streamed on a reader thread (``write_export``);
- ``forget``: ``Forgetter``: the rows in one transaction (``storage.forget``), then the files,
  the memory profile, VACUUM; ``resume`` at daemon start for a forget a crash cut off;
- ``confirm``: /forget-me's pending confirmations (two minutes, the asker only);
- ``service``: ``UserData`` (``Services.userdata``), which the commands and the control socket use.

"Their memory entries": the memory files are the assistant's, not per person. USER.md is its
profile of the installation's user, taken to be the owner: an owner's export lists it and an
owner's forget clears it; MEMORY.md (the assistant's notes about its environment) is nobody's.

Its names load on first use (``storage.lazy``): the command line's export and forget do not
load the router's services.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

if TYPE_CHECKING:
    from gateway.userdata.confirm import (
        CONFIRM_PREFIX,
        CONFIRM_SECONDS,
        Confirmations,
        PendingForget,
        Taken,
        parse_sender,
    )
    from gateway.userdata.export import FORMAT, ExportSummary, write_export
    from gateway.userdata.forget import ForgetReport, Forgetter, clear_profile
    from gateway.userdata.service import ExportSent, UserData, userdata_of

__all__ = [
    "CONFIRM_PREFIX",
    "CONFIRM_SECONDS",
    "FORMAT",
    "Confirmations",
    "ExportSent",
    "ExportSummary",
    "ForgetReport",
    "Forgetter",
    "PendingForget",
    "Taken",
    "UserData",
    "clear_profile",
    "parse_sender",
    "userdata_of",
    "write_export",
]

_WHERE = {
    "CONFIRM_PREFIX": "gateway.userdata.confirm",
    "CONFIRM_SECONDS": "gateway.userdata.confirm",
    "Confirmations": "gateway.userdata.confirm",
    "ExportSent": "gateway.userdata.service",
    "ExportSummary": "gateway.userdata.export",
    "FORMAT": "gateway.userdata.export",
    "ForgetReport": "gateway.userdata.forget",
    "Forgetter": "gateway.userdata.forget",
    "PendingForget": "gateway.userdata.confirm",
    "Taken": "gateway.userdata.confirm",
    "UserData": "gateway.userdata.service",
    "clear_profile": "gateway.userdata.forget",
    "parse_sender": "gateway.userdata.confirm",
    "userdata_of": "gateway.userdata.service",
    "write_export": "gateway.userdata.export",
}

__getattr__ = lazy_names(__name__, _WHERE)
