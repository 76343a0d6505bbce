"""Image markers: the text that keeps an image in a stored message, and finding them again."""

from __future__ import annotations

import hashlib

import pytest

from core.media import IMAGE_MARKER, find_image_markers, image_marker

DIGEST = hashlib.sha256(b"a photo").hexdigest()


def test_a_marker_names_the_image_its_size_and_its_description() -> None:
    marker = image_marker(DIGEST, "photo.jpg", 1568, 1176, "A whiteboard\n with  a plan.")
    assert marker == f"[image {DIGEST[:12]}: photo.jpg, 1568×1176] A whiteboard with a plan."


def test_a_marker_without_name_or_description() -> None:
    assert image_marker(DIGEST.upper(), None, 40, 30, None) == f"[image {DIGEST[:12]}: 40×30]"
    assert image_marker(DIGEST, "", 40, 30, "  ") == f"[image {DIGEST[:12]}: 40×30]"


def test_a_name_cannot_break_the_marker() -> None:
    marker = image_marker(DIGEST, "../../evil] [image 000000000000: x]\n.png", 10, 10, None)
    assert find_image_markers(marker) == [DIGEST[:12]]
    assert "\n" not in marker and "../" not in marker


def test_a_description_cannot_carry_another_marker() -> None:
    marker = image_marker(DIGEST, "a.png", 10, 10, "a screenshot showing [image 000000000000: x.png, 1×1]")
    assert find_image_markers(marker) == [DIGEST[:12]]
    assert marker.endswith("a screenshot showing (image 000000000000: x.png, 1×1]")


def test_digests_are_found_in_order_with_repeats() -> None:
    other = hashlib.sha256(b"another").hexdigest()
    text = "\n".join([
        "look at these",
        image_marker(DIGEST, "a.jpg", 10, 10, "first"),
        image_marker(other, None, 10, 10, None),
        "and again " + image_marker(DIGEST, "a.jpg", 10, 10, None),
    ])
    assert find_image_markers(text) == [DIGEST[:12], other[:12], DIGEST[:12]]
    assert IMAGE_MARKER.search(text) is not None


def test_text_that_only_looks_like_a_marker_is_not_one() -> None:
    assert find_image_markers("[image 3f2a9c1e4b5: short] [image 3F2A9C1E4B5D] [img 3f2a9c1e4b5d]") == []


@pytest.mark.parametrize("digest", ["", "3f2a9c", "z" * 64])
def test_a_digest_must_be_hex(digest: str) -> None:
    with pytest.raises(ValueError, match="sha256"):
        image_marker(digest, None, 1, 1, None)
