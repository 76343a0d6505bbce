"""A photo or screenshot made fit for the model: small, upright, and without metadata.

``prepare_image`` is CPU work: the gateway runs it in a thread (``asyncio.to_thread``).
Its defences, in order:

- only the common raster formats are opened (never EPS, which Pillow hands to Ghostscript);
- the size in the header is checked against ``max_pixels`` *before* any pixel is decoded,
  so a 100000x100000 PNG of a few hundred bytes costs nothing; Pillow's own bomb check is
  left as Pillow sets it (its global is shared by the whole process): its error becomes
  ours, and an image it only warns about is refused as well;
- a JPEG is decoded at a reduced scale (``draft``): a 12-megapixel photo decodes at
  2000x1500 when 1568 pixels are wanted, four times less work;
- the EXIF orientation is applied, then every piece of metadata (EXIF with GPS, XMP,
  ICC profile, comments) is left behind: only pixels are written out;
- an animation gives its first frame; CMYK, palette and grey modes become RGB (or RGBA).
"""

from __future__ import annotations

import base64
import io
import struct
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageOps, UnidentifiedImageError

from .errors import UnreadableMediaError

# The formats a phone, a browser or a screenshot tool sends. ("JPEG" also opens MPO, a camera
# JPEG with a second picture, which Pillow reports as its own format.)
_FORMATS = ("JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF")
_JPEG_QUALITY = 85
# A box filter (the mean of the pixels each output pixel covers) is the right one for shrinking
# and the cheapest: after draft() the shrink left is under 2x, where a 2000x1500 -> 1568x1176
# resize takes 19 ms against bilinear's 27 and Lanczos's ~60 on this machine (bench/media.py).
_RESAMPLE = Image.Resampling.BOX

# What Pillow's decoders raise on corrupt or hostile input.
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, struct.error, IndexError, KeyError,
                  Image.DecompressionBombError)


@dataclass(frozen=True)
class PreparedImage:
    """The image as the model gets it (``data`` in ``mime``), and the size it came in."""

    data: bytes
    mime: str
    width: int
    height: int
    source_width: int
    source_height: int


def prepare_image(data: bytes, *, max_px: int = 1568, max_pixels: int = 50_000_000) -> PreparedImage:
    """``data`` decoded, turned upright, shrunk so its long side is at most ``max_px`` (never
    enlarged) and written as JPEG, or PNG when it has transparent pixels.

    Raises :class:`UnreadableMediaError` for empty, corrupt, truncated or unsupported bytes
    and for an image of more than ``max_pixels`` pixels.
    """
    if max_px < 1:
        raise ValueError("max_px must be at least 1")
    if not data:
        raise UnreadableMediaError("that image is empty (0 bytes)")
    try:
        img = Image.open(io.BytesIO(data), formats=_FORMATS)
    except Image.DecompressionBombError as exc:
        raise UnreadableMediaError("that image is too large to open (it claims too many pixels)") from exc
    except UnidentifiedImageError as exc:
        raise UnreadableMediaError("that file is not an image that can be read here") from exc
    except _DECODE_ERRORS as exc:
        raise UnreadableMediaError(_why(exc)) from exc
    with img:
        source_width, source_height = img.size
        if source_width < 1 or source_height < 1:
            raise UnreadableMediaError("that image could not be read (it has no pixels)")
        # Whatever Pillow only warns about (over its MAX_IMAGE_PIXELS) is refused here too.
        limit = min(max_pixels, Image.MAX_IMAGE_PIXELS or max_pixels)
        if source_width * source_height > limit:
            raise UnreadableMediaError(
                f"that image is too large to open ({source_width}x{source_height} pixels)")
        try:
            out, turned = _decode_and_shrink(img, max_px)
            encoded, mime = _encode(out)
        except _DECODE_ERRORS as exc:
            raise UnreadableMediaError(_why(exc)) from exc
    if turned:  # the size as the picture is shown, upright
        source_width, source_height = source_height, source_width
    return PreparedImage(encoded, mime, out.width, out.height, source_width, source_height)


def image_part(img: PreparedImage) -> dict[str, Any]:
    """The OpenAI chat content part that carries ``img`` (a base64 data URL)."""
    url = f"data:{img.mime};base64,{base64.b64encode(img.data).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url}}


def _decode_and_shrink(img: Image.Image, max_px: int) -> tuple[Image.Image, bool]:
    """The image upright and at most ``max_px`` on its long side; whether it was turned a quarter."""
    if img.format in ("JPEG", "MPO"):
        scale = max_px / max(img.size)
        if scale < 1:
            # draft picks the largest 1/2, 1/4 or 1/8 scale that stays at least this big.
            img.draft(img.mode, (max(1, int(img.width * scale)), max(1, int(img.height * scale))))
    img.load()
    stored = img.size
    ImageOps.exif_transpose(img, in_place=True)
    turned = img.size != stored
    out = _plain_mode(img)
    if max(out.size) > max_px:
        scale = max_px / max(out.size)
        out = out.resize((max(1, round(out.width * scale)), max(1, round(out.height * scale))), _RESAMPLE)
    return out, turned


def _plain_mode(img: Image.Image) -> Image.Image:
    """RGBA when some pixel is see-through, RGB otherwise."""
    if img.has_transparency_data:
        rgba = img.convert("RGBA")
        low = rgba.getchannel("A").getextrema()[0]
        if isinstance(low, int | float) and low < 255:
            return rgba
        return rgba.convert("RGB")
    return img if img.mode == "RGB" else img.convert("RGB")


def _encode(img: Image.Image) -> tuple[bytes, str]:
    # Pixels only: whatever .info carries (EXIF, XMP, ICC, comments) stays behind.
    img.info = {}
    buf = io.BytesIO()
    if img.mode == "RGBA":
        img.save(buf, format="PNG", compress_level=6)
        return buf.getvalue(), "image/png"
    img.save(buf, format="JPEG", quality=_JPEG_QUALITY)
    return buf.getvalue(), "image/jpeg"


def _why(exc: BaseException) -> str:
    if isinstance(exc, Image.DecompressionBombError):
        return "that image is too large to open (it claims too many pixels)"
    text = str(exc).lower()
    if isinstance(exc, EOFError) or "truncated" in text or "premature end" in text:
        return "that image could not be read (it looks truncated)"
    return "that image could not be read (it looks corrupt)"
