"""Real media bytes made in the test: JPEGs with EXIF, PNGs, GIFs, WAVs, PDFs and zips."""

from __future__ import annotations

import io
import math
import struct
import wave
import zipfile
import zlib

from PIL import ExifTags, Image, ImageCms

# 52°31'12"N 13°24'36"E: a place that must not leave the machine.
GPS = {
    ExifTags.GPS.GPSLatitudeRef: "N",
    ExifTags.GPS.GPSLatitude: (52.0, 31.0, 12.0),
    ExifTags.GPS.GPSLongitudeRef: "E",
    ExifTags.GPS.GPSLongitude: (13.0, 24.0, 36.0),
}


def two_tone(size: tuple[int, int], top: tuple[int, int, int], bottom: tuple[int, int, int]) -> Image.Image:
    """An RGB image whose upper half is ``top`` and lower half ``bottom``."""
    img = Image.new("RGB", size, bottom)
    img.paste(top, (0, 0, size[0], size[1] // 2))
    return img


def jpeg(img: Image.Image, *, orientation: int | None = None, gps: bool = False, icc: bool = False,
         quality: int = 90) -> bytes:
    exif = Image.Exif()
    exif[ExifTags.Base.Make] = "FakeCam"
    if orientation is not None:
        exif[ExifTags.Base.Orientation] = orientation
    if gps:
        exif[ExifTags.IFD.GPSInfo] = GPS
    extra = {"icc_profile": ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()} if icc else {}
    buf = io.BytesIO()
    img.save(buf, format="JPEG", exif=exif, quality=quality, comment=b"secret comment", **extra)
    return buf.getvalue()


def png(img: Image.Image, **params: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", **params)
    return buf.getvalue()


def gif_two_frames() -> bytes:
    """An animated GIF: a red frame, then a blue one."""
    frames = [Image.new("RGB", (40, 30), (255, 0, 0)), Image.new("RGB", (40, 30), (0, 0, 255))]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return buf.getvalue()


def png_header_claiming(width: int, height: int) -> bytes:
    """A valid PNG header (signature, IHDR with a right CRC) for an image it does not contain,
    then one tiny IDAT and IEND: the bytes of a decompression bomb, without the bomb."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def wav(seconds: float = 0.5, rate: int = 16000) -> bytes:
    """A mono 16-bit WAV of a 440 Hz tone."""
    frames = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate)))
                      for i in range(int(seconds * rate)))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(frames)
    return buf.getvalue()


def pdf(pages: list[str]) -> bytes:
    """A PDF written by hand: one page per string, each shown in Helvetica (pypdf reads it back)."""
    count = len(pages)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(count))
        + b"] /Count %d >>" % count,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")
        content = b"BT /F1 12 Tf 72 720 Td (" + escaped + b") Tj ET"
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i))
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def zip_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buf.getvalue()


def zip_bomb(unpacked_mb: int) -> bytes:
    """A zip of one file of ``unpacked_mb`` MB of zeros: a few hundred KB packed."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive, \
            archive.open("payload.bin", "w", force_zip64=True) as member:
        block = bytes(1 << 20)
        for _ in range(unpacked_mb):
            member.write(block)
    return buf.getvalue()
