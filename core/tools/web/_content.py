"""What a response is, from its declared type and its first bytes: HTML, text, or something else.

web_fetch reads HTML and text; a PDF, an image or an archive is described, never dumped into
the model's context. The declared type decides first (an ``image/png`` is not downloaded at
all); the first bytes can still overrule a text type (a PDF served as ``text/html``), and
decide alone when the server names no type, ``application/octet-stream`` or another
``application/*`` type (a PDF, a zip, or a script that is text after all).
"""

from __future__ import annotations

import codecs
import re
from typing import Literal

from core.media import sniff

__all__ = ["Kind", "declared_kind", "decode_text", "sniffed_kind"]

Kind = Literal["html", "text", "binary"]

_HTML_MIMES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_MIMES = frozenset({
    "application/json", "application/ld+json", "application/x-ndjson", "application/jsonl",
    "application/xml", "application/rss+xml", "application/atom+xml", "application/javascript",
    "application/x-javascript", "application/ecmascript", "application/yaml", "application/x-yaml",
    "application/toml", "application/csv", "application/x-sh", "application/sql", "application/markdown",
    "application/x-www-form-urlencoded", "application/graphql",
})
_UNKNOWN_MIMES = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/unknown"})
#: types never downloaded: their bytes are not text, and a film can be large
_MEDIA_FAMILIES = ("image/", "audio/", "video/", "font/", "model/")
#: sniffed families that are never shown as text, whatever the server declared
_NOT_TEXT = frozenset({"pdf", "image", "audio", "video", "archive"})
_HTML_TAG = re.compile(rb"<(?:!doctype\s+html|html|head|body)\b", re.I)
_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.I)
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def declared_kind(mime: str) -> Kind | None:
    """What the declared type says; None when the first bytes must decide: no type, a generic one,
    or an ``application/*`` type that may well be text (``application/x-python``)."""
    if mime in _HTML_MIMES:
        return "html"
    if mime.startswith("text/") or mime in _TEXT_MIMES or mime.endswith(("+json", "+xml")):
        return "text"
    if mime.startswith(_MEDIA_FAMILIES):
        return "binary"
    return None


def sniffed_kind(declared: Kind | None, mime: str, head: bytes) -> tuple[Kind, str]:
    """The kind once the first bytes are seen, and the type to report: the declared one, unless
    the bytes overrule it (a PDF served as ``text/html``) or it said nothing (octet-stream)."""
    found = sniff(head)
    vague = declared is not None or mime in _UNKNOWN_MIMES
    if found.kind in _NOT_TEXT:
        return "binary", found.mime if vague else mime
    if declared is not None:
        return declared, mime
    if found.kind != "text":
        return "binary", found.mime if vague else mime
    if _starts_as_html(head[:2048]):
        return "html", "text/html"
    return "text", found.mime if vague else mime


def _starts_as_html(head: bytes) -> bool:
    """Whether the first tag, past a byte-order mark, blanks and comments, opens an HTML page.
    (A loop, not one regular expression: comments repeated in a pattern backtrack exponentially.)"""
    rest = head.removeprefix(codecs.BOM_UTF8).lstrip()
    while rest.startswith(b"<!--"):
        end = rest.find(b"-->")
        if end < 0:
            return False
        rest = rest[end + 3:].lstrip()
    return _HTML_TAG.match(rest) is not None


def _codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name.strip().strip("'\"")).name
    except LookupError:
        return None


def decode_text(body: bytes, charset: str | None, kind: Kind) -> str:
    """The body as text: the header's charset, else a byte-order mark, else an HTML page's own
    ``<meta charset>``, else UTF-8; bytes that do not decode become U+FFFD (a cut body may end
    inside a character)."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body.decode(name, errors="replace")
    codec = _codec(charset)
    if codec is None and kind == "html":
        meta = _META_CHARSET.search(body[:4096])
        codec = _codec(meta.group(1).decode("ascii")) if meta else None
    return body.decode(codec or "utf-8", errors="replace")
