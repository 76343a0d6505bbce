"""sniff: the bytes say what a file is; the name only picks a text subtype."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from PIL import Image

from core.media import SNIFF_BYTES, Sniffed, sniff

from ._samples import gif_two_frames, jpeg, pdf, png, wav, zip_of

_SAFE_EXT = re.compile(r"^[a-z0-9]{1,10}$")


def test_a_png_named_pdf_is_a_png() -> None:
    data = png(Image.new("RGB", (4, 4)))
    assert sniff(data[:SNIFF_BYTES], "x.pdf") == Sniffed("image/png", "image", "png")


def test_a_zip_named_txt_is_an_archive() -> None:
    data = zip_of({"a.txt": b"hello"})
    assert sniff(data, "notes.txt") == Sniffed("application/zip", "archive", "zip")


@pytest.mark.parametrize(
    ("data", "mime", "kind"),
    [
        (jpeg(Image.new("RGB", (8, 8))), "image/jpeg", "image"),
        (gif_two_frames(), "image/gif", "image"),
        (wav(0.05), "audio/x-wav", "audio"),
        (pdf(["hello"]), "application/pdf", "pdf"),
    ],
)
def test_media_by_their_magic_numbers_whatever_the_name(data: bytes, mime: str, kind: str) -> None:
    for name in (None, "notes.txt", "../../.hermes/.env"):
        got = sniff(data[:SNIFF_BYTES], name)
        assert (got.mime, got.kind) == (mime, kind)


@pytest.mark.parametrize(
    ("name", "mime", "ext"),
    [
        ("README.md", "text/markdown", "md"),
        ("table.CSV", "text/csv", "csv"),
        ("data.json", "application/json", "json"),
        ("main.py", "text/x-python", "py"),
        ("server.log", "text/plain", "log"),
        ("plain", "text/plain", "txt"),
        (None, "text/plain", "txt"),
        ("setup.exe", "text/plain", "txt"),  # the name cannot turn text into a program
        ("../../.hermes/.env", "text/plain", "txt"),
        ("a.md/../x.py", "text/x-python", "py"),
    ],
)
def test_text_subtype_comes_from_the_name(name: str | None, mime: str, ext: str) -> None:
    assert sniff(b'{"a": 1, "b": "caf\xc3\xa9"}\n', name) == Sniffed(mime, "text", ext)


@pytest.mark.parametrize(
    "data",
    [b"BMI per person\n", b"MZ-70 notes\n", b"ID3 tags explained\n", b"GIF89a is a format\n", b"OggS is a container\n"],
)
def test_text_that_starts_like_a_magic_number_is_text(data: bytes) -> None:
    assert sniff(data, "notes.md") == Sniffed("text/markdown", "text", "md")


def test_a_pdf_in_plain_ascii_is_a_pdf() -> None:
    data = pdf(["hello"])
    assert data.isascii()
    assert sniff(data, "x.txt").kind == "pdf"


def test_a_character_cut_by_the_end_of_the_head_is_still_text() -> None:
    data = ("é" * SNIFF_BYTES).encode()  # two bytes each: the head ends inside one
    assert sniff(data[:SNIFF_BYTES], "x.txt").kind == "text"


def test_coloured_log_lines_are_text() -> None:
    assert sniff(b"\x1b[32mINFO\x1b[0m started\r\n\tdone\n", "app.log").kind == "text"


@pytest.mark.parametrize(
    "data",
    [
        b"hello\x00world",
        "caf\u00e9 na\u00efve".encode("latin-1"),  # not UTF-8
        bytes(range(1, 32)) * 10,  # control characters
        "λόγος".encode("utf-16"),
    ],
)
def test_bytes_that_are_not_text_are_binary(data: bytes) -> None:
    assert sniff(data, "notes.txt") == Sniffed("application/octet-stream", "binary", "bin")


def test_nothing_is_binary() -> None:
    assert sniff(b"", "x.txt").kind == "binary"


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64), st.one_of(st.none(), st.text(max_size=40)))
@example(b"\x1f\xa0", None)  # compress(1) data: filetype calls its extension "Z"
def test_any_bytes_and_any_name_give_a_safe_extension(data: bytes, name: str | None) -> None:
    got = sniff(data, name)
    assert _SAFE_EXT.match(got.ext), got
    assert got.kind in ("image", "audio", "video", "pdf", "text", "archive", "binary")
