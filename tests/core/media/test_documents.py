"""read_document: text inlined, PDFs read within caps, everything else described, never unpacked."""

from __future__ import annotations

import io
import tracemalloc

import pytest
from PIL import Image
from pypdf import PdfReader, PdfWriter

from core.media import DocumentText, UnreadableMediaError, display_name, read_document, sniff

from ._samples import jpeg, pdf, zip_bomb, zip_of


def _read(data: bytes, name: str | None, **caps: int) -> DocumentText:
    return read_document(data, sniff(data, name), name, **caps)


def test_a_small_text_file_is_inlined_with_a_note() -> None:
    data = "# Plan\n\n- café at 9\n".encode()
    doc = _read(data, "plan.md")
    assert doc.text == "# Plan\n\n- café at 9\n"
    assert (doc.pages, doc.truncated) == (None, False)
    assert doc.note == "plan.md, Markdown, 21 bytes"


def test_a_bom_and_a_stray_invalid_byte_do_not_stop_a_text_file() -> None:
    data = b"\xef\xbb\xbfid,name\n1,caf\xc3\xa9\n" + b"x" * 9000 + b"\n2,\xff\n"
    doc = _read(data, "t.csv")
    assert doc.text is not None
    assert doc.text.startswith("id,name\n1,café\n") and doc.text.endswith("2,\ufffd\n")
    assert doc.note.startswith("t.csv, CSV, ")


def test_a_text_file_over_the_inline_cap_is_described_not_inlined() -> None:
    data = b"2026-11-25 INFO all good\n" * 10_000  # 250 KB
    doc = _read(data, "server.log", max_inline_bytes=100 * 1024)
    assert doc.text is None and doc.truncated
    assert doc.note == "server.log, text, 244 KB; too long to include (over 100 KB)"


def test_the_senders_path_is_never_shown_only_its_last_part() -> None:
    doc = _read(b"SECRET=1\n", "../../.hermes/.env")
    assert doc.note.startswith(".env, text, ")
    assert display_name("C:\\Users\\me\\x\x07y.txt") == "xy.txt"
    assert display_name("..") == "" and display_name(None) == ""
    assert len(display_name("a" * 500 + ".txt")) == 80


def test_a_pdf_is_read_page_by_page() -> None:
    data = pdf(["Quarterly report", "Revenue grew (a lot)", "Thanks"])
    doc = _read(data, "report.pdf")
    assert doc.text == "[page 1]\nQuarterly report\n\n[page 2]\nRevenue grew (a lot)\n\n[page 3]\nThanks"
    assert (doc.pages, doc.truncated) == (3, False)
    assert doc.note == f"report.pdf, PDF, 3 pages, {len(data) / 1024:.1f} KB"


def test_a_pdf_of_5000_pages_is_read_only_up_to_the_page_cap() -> None:
    data = pdf([f"this is page {n}" for n in range(1, 5001)])
    doc = _read(data, "huge.pdf", pdf_max_pages=50)
    assert doc.pages == 5000 and doc.truncated
    assert doc.text is not None
    assert "[page 50]\nthis is page 50" in doc.text and "[page 51]" not in doc.text
    assert doc.note.endswith("; only the first 50 pages were read, the rest were skipped")


def test_a_pdf_is_cut_at_the_character_cap() -> None:
    data = pdf(["A" * 300, "B" * 300, "C" * 300])
    doc = _read(data, "long.pdf", pdf_max_chars=500)
    assert doc.text is not None and len(doc.text) == 500 and doc.truncated
    assert "C" not in doc.text
    assert doc.note.endswith("; its text was cut at 500 characters, on page 2")


def test_a_pdf_without_text_says_so() -> None:
    buf = io.BytesIO()
    Image.new("RGB", (200, 100), (255, 255, 255)).save(buf, format="PDF")  # a scan: pixels only
    doc = _read(buf.getvalue(), "scan.pdf")
    assert doc.text is None and doc.pages == 1
    assert doc.note.startswith("scan.pdf, PDF, 1 page, ")
    assert doc.note.endswith("; no text could be read from it (a scan?)")


def _encrypted(user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf(["top secret"]))))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_a_password_protected_pdf_is_refused_plainly() -> None:
    with pytest.raises(UnreadableMediaError, match=r"^that PDF is password-protected, so it could not be read$"):
        _read(_encrypted("hunter2"), "locked.pdf")


def test_a_pdf_locked_only_for_editing_is_read() -> None:
    doc = _read(_encrypted(""), "owner-only.pdf")
    assert doc.text == "[page 1]\ntop secret"


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.7\n" + b"\x00garbage\xff" * 50,
        b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R",
    ],
)
def test_a_corrupt_pdf_is_unreadable(data: bytes) -> None:
    assert sniff(data, "x.pdf").kind == "pdf"
    with pytest.raises(UnreadableMediaError, match=r"^that PDF could not be read"):
        _read(data, "x.pdf")


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9])
def test_a_truncated_pdf_is_unreadable(keep: float) -> None:
    data = pdf(["one", "two", "three"])
    with pytest.raises(UnreadableMediaError, match=r"^that PDF could not be read \(it looks damaged or cut short\)$"):
        _read(data[: int(len(data) * keep)], "cut.pdf")


def test_a_zip_bomb_is_described_not_unpacked() -> None:
    bomb = zip_bomb(64)
    assert len(bomb) < 1024 * 1024
    tracemalloc.start()
    try:
        doc = _read(bomb, "backup.zip")
        _size, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024  # unpacking it would take 64 MB
    assert doc.text is None and doc.pages is None
    assert doc.note.startswith("backup.zip, ZIP archive, ")
    assert doc.note.endswith("; it holds 1 file, 64 MB unpacked (nothing was unpacked)")


def test_a_zip_named_txt_is_described_as_the_zip_it_is() -> None:
    doc = _read(zip_of({"a.txt": b"x", "b/c.txt": b"y"}), "notes.txt")
    assert doc.text is None
    assert doc.note.startswith("notes.txt, ZIP archive, ") and "it holds 2 files" in doc.note


def test_a_damaged_zip_is_still_described() -> None:
    data = zip_of({"a.txt": b"hello" * 100})
    doc = _read(data[:-30], "broken.zip")
    assert doc.text is None and doc.note.endswith("; its list of contents could not be read")


@pytest.mark.parametrize(
    ("data", "name", "start"),
    [
        (jpeg(Image.new("RGB", (8, 8))), "photo.jpg", "photo.jpg, image/jpeg, "),
        (b"\x7fELF\x02\x01\x01" + b"\x00" * 60, "tool", "tool, application/x-executable, "),
        (bytes(range(256)), None, "a .bin file, application/octet-stream, 256 bytes"),
    ],
)
def test_anything_else_gets_only_a_note(data: bytes, name: str | None, start: str) -> None:
    doc = _read(data, name)
    assert doc.text is None and doc.pages is None and not doc.truncated
    assert doc.note.startswith(start)
