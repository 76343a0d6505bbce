"""What a file is, from its first bytes: the sender's name and declared type are hints at most.

``sniff(head, name)`` reads the magic numbers with ``filetype``; bytes it does not
recognise are text when they decode as UTF-8 and hold no NUL. The name only picks a text
subtype (``.md`` is Markdown, ``.csv`` CSV, ``.py`` Python): a PNG named ``x.pdf`` is a
PNG, a zip named ``notes.txt`` is an archive, and a text file named ``x.exe`` is text.
"""

from __future__ import annotations

import codecs
import posixpath
from dataclasses import dataclass
from typing import Literal

import filetype

Kind = Literal["image", "audio", "video", "pdf", "text", "archive", "binary"]

#: How many leading bytes ``sniff`` looks at (``filetype`` reads no more than this).
SNIFF_BYTES = 8192

_ARCHIVE_MIMES = frozenset({
    "application/zip", "application/x-tar", "application/x-rar-compressed", "application/gzip",
    "application/x-bzip2", "application/x-7z-compressed", "application/x-xz", "application/zstd",
    "application/x-lz4", "application/x-lzip", "application/x-lzop", "application/x-compress",
    "application/x-brotli", "application/x-unix-archive", "application/x-deb", "application/x-rpm",
    "application/vnd.ms-cab-compressed",
})

# The name's suffix, for bytes that are text: (mime, ext). Anything else is plain text.
_TEXT_TYPES: dict[str, str] = {
    "md": "text/markdown", "markdown": "text/markdown", "rst": "text/x-rst",
    "csv": "text/csv", "tsv": "text/tab-separated-values",
    "json": "application/json", "jsonl": "application/jsonl", "ndjson": "application/jsonl",
    "yaml": "application/yaml", "yml": "application/yaml", "toml": "application/toml",
    "ini": "text/plain", "cfg": "text/plain", "conf": "text/plain", "env": "text/plain",
    "xml": "application/xml", "svg": "application/xml", "html": "text/html", "htm": "text/html",
    "css": "text/css", "log": "text/plain", "txt": "text/plain",
    "py": "text/x-python", "js": "text/javascript", "mjs": "text/javascript", "ts": "text/x-typescript",
    "tsx": "text/x-typescript", "jsx": "text/javascript", "go": "text/x-go", "rs": "text/x-rust",
    "c": "text/x-c", "h": "text/x-c", "cc": "text/x-c++", "cpp": "text/x-c++", "hpp": "text/x-c++",
    "java": "text/x-java", "kt": "text/x-kotlin", "swift": "text/x-swift", "rb": "text/x-ruby",
    "php": "text/x-php", "cs": "text/x-csharp", "sh": "text/x-shellscript", "bash": "text/x-shellscript",
    "zsh": "text/x-shellscript", "sql": "text/x-sql", "diff": "text/x-diff", "patch": "text/x-diff",
    "tex": "text/x-tex", "lua": "text/x-lua", "r": "text/x-r", "scala": "text/x-scala",
}


@dataclass(frozen=True)
class Sniffed:
    """What the bytes are: a MIME type, its family (``kind``) and a safe extension (no dot,
    only ``[a-z0-9]``, fit to end a stored file's name)."""

    mime: str
    kind: Kind
    ext: str


def sniff(head: bytes, name: str | None = None) -> Sniffed:
    """What ``head`` (the file's first :data:`SNIFF_BYTES` bytes, or all of it) is."""
    if not head:
        return Sniffed("application/octet-stream", "binary", "bin")
    head = head[:SNIFF_BYTES]
    guess = filetype.guess(head)
    # Some magic numbers are two or three letters ("BM" is a BMP, "MZ" a program, "ID3" an MP3):
    # a note that starts "BMI per person" is text, which real media never is (they hold NULs or
    # bytes that are not UTF-8). A PDF may be all ASCII and is still read as a PDF.
    text = _looks_like_text(head)
    if guess is not None and (not text or guess.mime == "application/pdf"):
        mime, ext = str(guess.mime), _safe_ext(str(guess.extension)) or "bin"
        return Sniffed(mime, _kind_of(mime), ext)
    if text:
        ext = _suffix(name)
        if ext in _TEXT_TYPES:
            return Sniffed(_TEXT_TYPES[ext], "text", ext)
        return Sniffed("text/plain", "text", "txt")
    return Sniffed("application/octet-stream", "binary", "bin")


def _kind_of(mime: str) -> Kind:
    if mime == "application/pdf":
        return "pdf"
    if mime in _ARCHIVE_MIMES:
        return "archive"
    family = mime.partition("/")[0]
    if family == "image" and mime != "image/vnd.dwg":  # a CAD drawing, not a picture
        return "image"
    if family == "audio":
        return "audio"
    if family == "video":
        return "video"
    return "binary"


def _looks_like_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    # An incremental decoder, so a character cut by the end of the head is not held against it.
    try:
        codecs.getincrementaldecoder("utf-8")("strict").decode(head, final=False)
    except UnicodeDecodeError:
        return False
    # Control characters other than whitespace (and ESC, for coloured logs) mark a binary file.
    controls = sum(1 for b in head if b < 0x20 and b not in b"\t\n\r\f\x1b")
    return controls * 100 <= len(head)


def _suffix(name: str | None) -> str:
    if not name:
        return ""
    base = posixpath.basename(name.replace("\\", "/"))
    stem, dot, ext = base.rpartition(".")
    return _safe_ext(ext.lower()) if dot and stem else ""


def _safe_ext(ext: str) -> str:
    # lower case: filetype names compress(1) data "Z", and stored names use one case only
    ext = ext.lower()
    return ext if ext.isascii() and ext.isalnum() and len(ext) <= 10 else ""
