"""A PDF's text with pypdf, within a page cap and a character cap.

pypdf parses hostile files in ``strict=False`` mode and guards itself (cycle and
decompression limits); what it raises on a broken file is of many kinds, and every
one of them means the same to the sender: the PDF could not be read.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from pypdf import PdfReader
from pypdf.errors import DependencyError

from .errors import UnreadableMediaError


@dataclass(frozen=True)
class PdfText:
    text: str
    pages: int
    pages_read: int
    #: the text stopped at the character cap (on page ``pages_read``)
    cut: bool

    @property
    def truncated(self) -> bool:
        return self.cut or self.pages_read < self.pages


def read_pdf(data: bytes, *, max_pages: int, max_chars: int) -> PdfText:
    """The text of at most ``max_pages`` pages and ``max_chars`` characters of ``data``."""
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        _unlock(reader)
        total = len(reader.pages)
    except UnreadableMediaError:
        raise
    except Exception as exc:  # pypdf's failures on a broken file are of every kind
        raise UnreadableMediaError("that PDF could not be read (it looks damaged or cut short)") from exc
    parts: list[str] = []
    chars, read, cut = 0, 0, False
    for number in range(min(total, max_pages)):
        try:
            text = reader.pages[number].extract_text() or ""
        except Exception:  # one broken page does not make the others unreadable
            text = "(this page could not be read)"
        read += 1
        text = text.replace("\x00", "").strip()
        if not text:
            continue
        part = f"[page {number + 1}]\n{text}"
        if chars + len(part) > max_chars:
            parts.append(part[: max(0, max_chars - chars)])
            cut = True
            break
        parts.append(part)
        chars += len(part) + 2
    return PdfText("\n\n".join(parts), total, read, cut)


def _unlock(reader: PdfReader) -> None:
    """Open an encrypted PDF that needs no password to read (many are locked only for editing)."""
    if not reader.is_encrypted:
        return
    try:
        opened = reader.decrypt("")
    except DependencyError as exc:
        raise UnreadableMediaError("that PDF is encrypted in a way that cannot be read here") from exc
    if not opened:
        raise UnreadableMediaError("that PDF is password-protected, so it could not be read")
