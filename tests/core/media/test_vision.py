"""describe_image against the fake OpenAI server: what the vision model is sent, and its failures."""

from __future__ import annotations

import base64

import pytest
from PIL import Image

from core.media import PreparedImage, VisionError, describe_image, prepare_image
from tests.fakes import FakeOpenAI

from ._samples import jpeg, two_tone

KEY = "sk-vision-0123456789"


def _photo() -> PreparedImage:
    return prepare_image(jpeg(two_tone((3000, 2000), (200, 0, 0), (0, 0, 200)), gps=True))


async def _describe(server: FakeOpenAI, img: PreparedImage, **kw: object) -> str:
    options: dict[str, object] = {"base_url": server.base_url, "model": "fake-vision", "api_key": KEY,
                                  "timeout": 10.0, **kw}
    return await describe_image(img, **options)  # type: ignore[arg-type]


async def test_the_image_reaches_the_model_as_a_data_url_of_the_prepared_jpeg(fake_openai: FakeOpenAI) -> None:
    img = _photo()
    fake_openai.reply("  Red above blue.\n")

    assert await _describe(fake_openai, img, prompt="What is this?") == "Red above blue."

    [request] = fake_openai.chat_requests
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    body = request.body
    assert body["model"] == "fake-vision"
    [message] = body["messages"]
    assert message["role"] == "user"
    text, picture = message["content"]
    assert text == {"type": "text", "text": "What is this?"}
    assert picture["type"] == "image_url"
    prefix = "data:image/jpeg;base64,"
    url = picture["image_url"]["url"]
    assert url.startswith(prefix)
    sent = base64.b64decode(url[len(prefix):], validate=True)
    assert sent == img.data
    assert sent[:3] == b"\xff\xd8\xff" and b"Exif" not in sent


async def test_an_answer_in_parts_is_joined(fake_openai: FakeOpenAI) -> None:
    img = prepare_image(jpeg(Image.new("RGB", (20, 20))))
    fake_openai.reply("", content=[{"type": "text", "text": "A black "}, {"type": "text", "text": "square."}])
    assert await _describe(fake_openai, img) == "A black square."


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (lambda f: f.fail(500), r"^the vision model failed: the service answered HTTP 500: fake failure"),
        (lambda f: f.fail(400), r"^the vision model failed: the service answered HTTP 400"),
        (lambda f: f.fail(404), r"HTTP 404 \(check the base URL and the model name\)"),
        (lambda f: f.reply(""), r"^the vision model gave no description of the image$"),
        (lambda f: f.respond(200, {"choices": []}), r"^the vision model sent back an answer without a message$"),
        (lambda f: f.respond(200, "not json"), r"^the vision model sent back an answer that is not JSON$"),
        (lambda f: f.hang(), r"^the vision model timed out after 0.2 s$"),
    ],
)
async def test_failures_are_vision_errors(fake_openai: FakeOpenAI, script: object, message: str) -> None:
    script(fake_openai)  # type: ignore[operator]
    img = prepare_image(jpeg(Image.new("RGB", (20, 20))))
    with pytest.raises(VisionError, match=message):
        await _describe(fake_openai, img, timeout=0.2)


async def test_a_refused_key_is_not_repeated(fake_openai: FakeOpenAI) -> None:
    fake_openai.api_key = "sk-the-right-one"
    img = prepare_image(jpeg(Image.new("RGB", (20, 20))))
    with pytest.raises(VisionError) as caught:
        await _describe(fake_openai, img)
    assert "HTTP 401 (the API key was refused)" in str(caught.value) and KEY not in str(caught.value)
