"""A file's text for the model, or a one-line description of it when it has none to give.

``read_document`` is CPU work: the gateway runs it in a thread. Text files (by their
sniffed type) up to ``max_inline_bytes`` are inlined whole; PDFs are read with pypdf
within a page and a character cap; everything else (archives, office files, binaries) is
only described: an archive's directory is read to say what it holds, nothing in it is
ever unpacked, so a zip bomb costs what its directory costs.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from dataclasses import dataclass

from .sniff import Sniffed

_NAME_LIMIT = 80

_LABELS = {
    "text/markdown": "Markdown", "text/csv": "CSV", "text/tab-separated-values": "TSV",
    "application/json": "JSON", "application/jsonl": "JSON lines", "application/yaml": "YAML",
    "application/toml": "TOML", "application/xml": "XML", "text/html": "HTML", "text/css": "CSS",
    "text/x-python": "Python", "text/javascript": "JavaScript", "text/x-typescript": "TypeScript",
    "text/x-go": "Go", "text/x-rust": "Rust", "text/x-c": "C", "text/x-c++": "C++",
    "text/x-shellscript": "shell script", "text/x-sql": "SQL", "text/x-diff": "diff",
    "application/zip": "ZIP archive", "application/x-tar": "tar archive", "application/gzip": "gzip file",
    "application/x-7z-compressed": "7z archive", "application/x-rar-compressed": "RAR archive",
}


@dataclass(frozen=True)
class DocumentText:
    """What the model is told about a file: ``text`` (inlined content, or None) and ``note``
    (one line: its name, type, size and what was or was not read)."""

    text: str | None
    pages: int | None
    truncated: bool
    note: str


def read_document(
    data: bytes,
    sniffed: Sniffed,
    name: str | None,
    *,
    max_inline_bytes: int = 100 * 1024,
    pdf_max_pages: int = 50,
    pdf_max_chars: int = 200_000,
) -> DocumentText:
    """The text of ``data`` (a file sniffed as ``sniffed``, sent as ``name``) and a note on it.

    Raises :class:`~core.media.errors.UnreadableMediaError` for a corrupt or
    password-protected PDF.
    """
    head = [display_name(name) or f"a .{sniffed.ext} file", _label(sniffed)]
    size = human_size(len(data))
    if sniffed.kind == "text":
        if len(data) > max_inline_bytes:
            note = ", ".join([*head, size]) + f"; too long to include (over {human_size(max_inline_bytes)})"
            return DocumentText(None, None, True, note)
        text = data.decode("utf-8-sig", errors="replace").replace("\x00", "")
        return DocumentText(text, None, False, ", ".join([*head, size]))
    if sniffed.kind == "pdf":
        from ._pdf import read_pdf  # pypdf costs 17 MB; loaded with the first PDF

        pdf = read_pdf(data, max_pages=pdf_max_pages, max_chars=pdf_max_chars)
        pages = f"{pdf.pages} page{'' if pdf.pages == 1 else 's'}"
        note = ", ".join([*head, pages, size])
        if pdf.cut:
            note += f"; its text was cut at {pdf_max_chars:,} characters, on page {pdf.pages_read}"
        elif pdf.pages > pdf.pages_read:
            note += f"; only the first {pdf.pages_read} pages were read, the rest were skipped"
        if not pdf.text:
            return DocumentText(None, pdf.pages, pdf.truncated, note + "; no text could be read from it (a scan?)")
        return DocumentText(pdf.text, pdf.pages, pdf.truncated, note)
    note = ", ".join([*head, size])
    if sniffed.mime == "application/zip":
        note += "; " + _zip_contents(data)
    return DocumentText(None, None, False, note)


def display_name(name: str | None) -> str:
    """``name`` as it may be shown: its last path part, printable, at most 80 characters."""
    if not name:
        return ""
    base = posixpath.basename(name.replace("\\", "/"))
    clean = "".join(c for c in base if c.isprintable()).strip()
    if clean in (".", ".."):
        return ""
    return clean if len(clean) <= _NAME_LIMIT else clean[: _NAME_LIMIT - 1] + "…"


def human_size(size: int) -> str:
    """``"512 bytes"``, ``"340 KB"``, ``"2.3 MB"`` (powers of 1024)."""
    if size < 1024:
        return f"{size} byte{'' if size == 1 else 's'}"
    value, unit = size / 1024, "KB"
    for bigger in ("MB", "GB", "TB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"


def _label(sniffed: Sniffed) -> str:
    if sniffed.kind == "pdf":
        return "PDF"
    if sniffed.mime in _LABELS:
        return _LABELS[sniffed.mime]
    if sniffed.kind == "text":
        return "text"
    return sniffed.mime


def _zip_contents(data: bytes) -> str:
    """What the zip's central directory says it holds; nothing is decompressed."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return "its list of contents could not be read"
    files = [e for e in entries if not e.is_dir()]
    unpacked = sum(e.file_size for e in files)
    count = f"{len(files)} file{'' if len(files) == 1 else 's'}"
    return f"it holds {count}, {human_size(unpacked)} unpacked (nothing was unpacked)"
