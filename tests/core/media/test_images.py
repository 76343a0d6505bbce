"""prepare_image: upright, small, without metadata; hostile bytes refused without decoding them."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from core.media import PreparedImage, UnreadableMediaError, image_part, prepare_image

from ._samples import gif_two_frames, jpeg, png, png_header_claiming, two_tone

RED, BLUE = (220, 20, 20), (20, 20, 220)


def _open(prepared: PreparedImage) -> Image.Image:
    img = Image.open(io.BytesIO(prepared.data))
    img.load()
    return img


def _near(pixel: object, colour: tuple[int, int, int]) -> bool:
    assert isinstance(pixel, tuple)
    return all(abs(a - b) <= 40 for a, b in zip(pixel[:3], colour, strict=True))


def test_a_camera_photo_is_turned_upright_shrunk_and_stripped() -> None:
    # Stored landscape, red on top; orientation 6 says "turn 90° clockwise to show it".
    data = jpeg(two_tone((4000, 3000), RED, BLUE), orientation=6, gps=True, icc=True)
    assert b"FakeCam" in data and b"secret comment" in data

    prepared = prepare_image(data)

    assert (prepared.width, prepared.height) == (1176, 1568)
    assert (prepared.source_width, prepared.source_height) == (3000, 4000)
    assert prepared.mime == "image/jpeg"
    out = _open(prepared)
    assert out.format == "JPEG" and out.size == (1176, 1568)
    # Turned clockwise: the top (red) is now on the right, the bottom (blue) on the left.
    assert _near(out.getpixel((1100, 784)), RED)
    assert _near(out.getpixel((50, 784)), BLUE)
    # No EXIF (so no GPS, no camera), no ICC profile, no comment: pixels only.
    assert len(out.getexif()) == 0
    assert not {"exif", "icc_profile", "comment", "xmp"} & set(out.info)
    for trace in (b"Exif", b"FakeCam", b"secret comment", b"ICC_PROFILE"):
        assert trace not in prepared.data


def test_a_small_image_is_never_enlarged() -> None:
    prepared = prepare_image(jpeg(Image.new("RGB", (300, 200), RED)))
    assert (prepared.width, prepared.height, prepared.source_width, prepared.source_height) == (300, 200, 300, 200)


def test_max_px_bounds_the_long_side() -> None:
    prepared = prepare_image(png(Image.new("RGB", (1000, 250), RED)), max_px=100)
    assert (prepared.width, prepared.height) == (100, 25)


def test_a_png_with_transparent_pixels_stays_a_png_with_its_alpha() -> None:
    img = Image.new("RGBA", (2000, 1000), (0, 0, 0, 0))
    img.paste((255, 0, 0, 255), (0, 0, 1000, 1000))
    exif = Image.Exif()
    exif[0x010F] = "FakeCam"
    prepared = prepare_image(png(img, exif=exif))

    assert prepared.mime == "image/png"
    out = _open(prepared)
    assert out.format == "PNG" and out.mode == "RGBA" and out.size == (1568, 784)
    assert out.getpixel((10, 10)) == (255, 0, 0, 255)
    assert out.getpixel((1500, 10))[3] == 0  # type: ignore[index]
    assert b"FakeCam" not in prepared.data and "exif" not in out.info


def test_an_alpha_channel_that_hides_nothing_becomes_a_jpeg() -> None:
    prepared = prepare_image(png(Image.new("RGBA", (50, 50), (1, 2, 3, 255))))
    assert prepared.mime == "image/jpeg"


@pytest.mark.parametrize(
    ("img", "params"),
    [
        (Image.new("CMYK", (64, 48), (0, 255, 255, 0)), {}),  # red in CMYK
        (Image.new("P", (64, 48), 1), {}),
        (Image.new("LA", (64, 48), (128, 255)), {}),
        (Image.new("L", (64, 48), 128), {}),
    ],
)
def test_other_modes_come_out_as_rgb(img: Image.Image, params: dict[str, object]) -> None:
    data = jpeg(img) if img.mode == "CMYK" else png(img, **params)
    prepared = prepare_image(data)
    out = _open(prepared)
    assert out.mode == "RGB" and prepared.mime == "image/jpeg" and out.size == (64, 48)


def test_an_animated_gif_gives_its_first_frame() -> None:
    prepared = prepare_image(gif_two_frames())
    out = _open(prepared)
    assert prepared.mime == "image/jpeg" and out.size == (40, 30)
    assert _near(out.getpixel((20, 15)), (255, 0, 0))


def test_an_animated_webp_gives_its_first_frame() -> None:
    frames = [Image.new("RGB", (40, 30), (255, 0, 0)), Image.new("RGB", (40, 30), (0, 0, 255))]
    buf = io.BytesIO()
    frames[0].save(buf, format="WEBP", save_all=True, append_images=frames[1:], duration=100, lossless=True)
    out = _open(prepare_image(buf.getvalue()))
    assert _near(out.getpixel((20, 15)), (255, 0, 0))


def test_a_bomb_header_is_refused_before_decoding() -> None:
    # 100000 x 100000 x 3 bytes would be 30 GB; the file is under 100 bytes.
    data = png_header_claiming(100_000, 100_000)
    assert len(data) < 100
    with pytest.raises(UnreadableMediaError, match="too large"):
        prepare_image(data)


def test_our_own_pixel_limit_holds_below_pillows() -> None:
    # 9000 x 9000 = 81 megapixels: under Pillow's own bomb limit, over ours.
    with pytest.raises(UnreadableMediaError, match=r"too large to open \(9000x9000 pixels\)"):
        prepare_image(png_header_claiming(9000, 9000))
    with pytest.raises(UnreadableMediaError, match="too large"):
        prepare_image(png(Image.new("RGB", (100, 100))), max_pixels=5000)
    assert Image.MAX_IMAGE_PIXELS == 89_478_485  # Pillow's global is left as it was


def test_what_pillow_only_warns_about_is_refused_too() -> None:
    # 10000 x 10000 = 100 megapixels: over Pillow's limit (a warning), under twice it (its error).
    with pytest.warns(Image.DecompressionBombWarning), \
            pytest.raises(UnreadableMediaError, match=r"too large to open \(10000x10000 pixels\)"):
        prepare_image(png_header_claiming(10_000, 10_000), max_pixels=200_000_000)


def test_a_truncated_jpeg_is_unreadable() -> None:
    data = jpeg(two_tone((800, 600), RED, BLUE))
    with pytest.raises(UnreadableMediaError, match=r"^that image could not be read \(it looks truncated\)$"):
        prepare_image(data[: len(data) // 2])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"just some text, not a picture", "not an image"),
        (bytes(range(256)) * 8, "not an image"),
        # EPS is an image format to Pillow, which would hand it to Ghostscript: refused unopened.
        (b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n", "not an image"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "could not be read|not an image"),
        (b"\xff\xd8\xff\xe0" + b"\x00\x10JFIF" + b"\xff" * 100, "could not be read|not an image"),
    ],
)
def test_bytes_that_are_no_image_are_unreadable(data: bytes, message: str) -> None:
    with pytest.raises(UnreadableMediaError, match=message):
        prepare_image(data)


def test_a_corrupt_body_after_a_good_header_is_unreadable() -> None:
    data = bytearray(png(two_tone((200, 200), RED, BLUE)))
    data[60:-20] = b"\x17" * (len(data) - 80)  # IDAT garbled, header and IEND intact
    with pytest.raises(UnreadableMediaError, match="could not be read"):
        prepare_image(bytes(data))


def test_image_part_is_a_data_url_of_the_prepared_bytes() -> None:
    prepared = prepare_image(jpeg(Image.new("RGB", (30, 20), RED)))
    part = image_part(prepared)
    assert part["type"] == "image_url"
    url = part["image_url"]["url"]
    prefix = "data:image/jpeg;base64,"
    assert url.startswith(prefix)
    assert base64.b64decode(url[len(prefix):]) == prepared.data
