"""``storage.url``: which backend holds the state, parsed once, shown without its password."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from .errors import StorageURLError

Backend = Literal["sqlite", "postgresql"]
_POSTGRES_SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True)
class StorageURL:
    """A parsed ``storage.url``. ``dsn`` carries the password for the driver; ``redacted`` is the
    only form that may reach a log line, an error or ``status``."""

    backend: Backend
    #: the state.db file (sqlite only)
    path: Path | None = None
    #: what asyncpg connects with (postgresql only); never logged
    dsn: str = ""
    redacted: str = ""

    def __repr__(self) -> str:  # a stray repr() in a log line must not carry the password
        return f"StorageURL({self.redacted!r})"

    __str__ = __repr__


def sqlite_url(path: Path) -> StorageURL:
    path = Path(path)
    return StorageURL(backend="sqlite", path=path, redacted=f"sqlite://{path}")


def parse_storage_url(raw: str | None, *, default_path: Path) -> StorageURL:
    """``None`` or empty: state.db at ``default_path``; ``sqlite:///abs/path``;
    ``postgresql://user:password@host:port/db``."""
    if raw is None or not raw.strip():
        return sqlite_url(default_path)
    raw = raw.strip()
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise StorageURLError(f"storage.url is malformed: {_redact(raw)} ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        # sqlite:///abs/path (three slashes, empty host); sqlite:///~/x is expanded for people who write it
        if parts.netloc:
            raise StorageURLError(f"storage.url {raw!r}: write sqlite:///absolute/path/state.db (no host)")
        path = Path(unquote(parts.path)).expanduser()
        if not path.is_absolute() or path.name == "":
            raise StorageURLError(f"storage.url {raw!r}: the sqlite path must be an absolute file path")
        return sqlite_url(path)
    if scheme in _POSTGRES_SCHEMES:
        if not parts.hostname and "host=" not in parts.query:
            raise StorageURLError(f"storage.url {_redact(raw)}: a postgresql URL needs a host")
        if not parts.path.strip("/"):
            raise StorageURLError(f"storage.url {_redact(raw)}: a postgresql URL needs a database name")
        del port  # parsed only to reject a bad one early
        return StorageURL(backend="postgresql", dsn=raw, redacted=_redact(raw))
    raise StorageURLError(
        f"storage.url {_redact(raw)}: unknown backend {scheme or '(none)'!r}; "
        "use sqlite:///path/state.db or postgresql://user:password@host/db"
    )


def _redact(raw: str) -> str:
    """The URL with its password (and any password= query) replaced by ***."""
    try:
        parts = urlsplit(raw)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostinfo = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hostinfo}"
    query = "&".join(
        f"{k}=***" if k.lower() in ("password", "sslpassword") else f"{k}={v}" if sep else k
        for k, sep, v in (item.partition("=") for item in parts.query.split("&") if item)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
