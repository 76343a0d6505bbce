"""Where media lives: files kept by the sha256 of their bytes under ``$HERMES_HOME/media/``.

No SQL here: which files are still needed is known to state.db
(``storage.attachments``); ``MediaStore.sweep`` asks it through a callable.
"""

from ._store import TEMP_MAX_AGE, BlobInfo, MediaStore, StoredBlob

__all__ = ["TEMP_MAX_AGE", "BlobInfo", "MediaStore", "StoredBlob"]
