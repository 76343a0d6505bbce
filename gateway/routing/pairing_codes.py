"""Pairing codes: made from ``secrets``, read back forgivingly, kept only as a keyed hash.

A code is 8 characters of an alphabet without look-alikes (no 0/O, 1/I/L), so that it survives
being read aloud or retyped. state.db holds ``HMAC-SHA256(key, code)``; the key is a file of its
own (``$HERMES_HOME/pairing.key``, mode 0600), so a copy of state.db alone cannot be searched for
the codes (40 bits would not stand up to an offline search of a plain hash). Several nodes over
one database share the key through their common ``.env`` (``HERMES_PAIRING_KEY``) instead: a code
one node gave is then approved through any of them.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path

__all__ = ["ALPHABET", "CODE_LENGTH", "CodeKey", "new_code", "read_code"]

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
_KEY_BYTES = 32


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def read_code(text: str) -> str | None:
    """The code someone typed (any case, spaces or dashes between groups allowed); None: not one."""
    code = "".join(text.split()).replace("-", "").upper()
    if len(code) != CODE_LENGTH or any(ch not in ALPHABET for ch in code):
        return None
    return code


class CodeKey:
    """The key of the codes' hashes: ``secret`` when given (``HERMES_PAIRING_KEY``), else the file,
    made on first use."""

    def __init__(self, path: Path, secret: bytes | None = None) -> None:
        self.path = path
        self._key: bytes | None = secret

    def _load(self) -> bytes:
        if self._key is None:
            try:
                key = self.path.read_bytes()
            except FileNotFoundError:
                key = b""
            if len(key) != _KEY_BYTES:
                key = self._create()
            self._key = key
        return self._key

    def _create(self) -> bytes:
        key = secrets.token_bytes(_KEY_BYTES)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            # Two processes making it at once: the first one's stands, and both use it.
            os.link(tmp, self.path)
        except FileExistsError:
            existing = self.path.read_bytes()
            if len(existing) == _KEY_BYTES:
                key = existing
            else:  # a damaged key: codes hashed with it cannot be checked anyway (they expire in an hour)
                os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return key

    def hash(self, code: str) -> bytes:
        return hmac.new(self._load(), code.encode("ascii"), hashlib.sha256).digest()
