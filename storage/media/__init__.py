"""Where media lives: files kept by the sha256 of their bytes under ``$HERMES_HOME/media/``.

No SQL here: which files are still needed is known to state.db
(``storage.attachments``), and ``MediaStore.sweep`` asks it through a callable.
How the daemon uses it (one ``MediaStore`` shared by every part):

- in: ``blob = await media.put(chunks, limit=...)``; store the message and its
  ``attachments.add`` rows in one ``StateStore.write``; then
  ``media.release(blob.sha256)`` (also when that write failed).
- out with the conversation: the write that deletes sessions or messages also
  deletes their rows (``ops``); after it, ``await media.sweep(referenced,
  only=<their sha256s>)``, or ``media.sweep(referenced)`` over every file, where
  ``referenced = lambda shas: store.read(lambda c: attachments.referenced(c, shas))``.
"""

from ._store import TEMP_MAX_AGE, BlobInfo, MediaStore, StoredBlob

__all__ = ["TEMP_MAX_AGE", "BlobInfo", "MediaStore", "StoredBlob"]
