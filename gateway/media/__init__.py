"""The media room: what people send besides text, taken in for a turn and kept for a while.

- ``intake``: a message's attachments downloaded (after the allowlist), stored, read by kind;
- ``recall``: the last turns' images found again for the model;
- ``pruner``: stored files deleted after ``media.retention_days`` and past ``media.max_total_mb``.

Built once by the daemon (``build_media``) from the validated config.
"""

from .build import build_media
from .intake import MediaIntake, TakenMedia
from .links import attach_linked_images, note_files
from .outbox import MAX_FILES, TurnFiles, from_ledger, to_ledger
from .pruner import MediaPruner, PruneReport
from .recall import ImageRecall
from .voice import speak_answer

__all__ = [
    "MAX_FILES",
    "ImageRecall",
    "MediaIntake",
    "MediaPruner",
    "PruneReport",
    "TakenMedia",
    "TurnFiles",
    "attach_linked_images",
    "build_media",
    "from_ledger",
    "note_files",
    "speak_answer",
    "to_ledger",
]
