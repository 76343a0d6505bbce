"""A turn's model (``ModelChoice``): its prices per call, and a model the server does not serve
(``ModelRejectedError``) told apart from other 4xx answers, against the scripted server."""

from __future__ import annotations

import pytest

from core import ModelClient, ModelPrices, ModelRejectedError, ModelResponseError, Usage
from core.llm import ModelSettings
from tests.fakes.openai_server import FakeOpenAI

HELLO = [{"role": "user", "content": "hi"}]


def _client(fake: FakeOpenAI) -> ModelClient:
    return ModelClient(ModelSettings(base_url=fake.base_url, model="fake-model", max_retries=2, backoff_base=0.0,
                                     backoff_max=0.0, timeout=30))


def test_cost_counts_cache_reads_apart_and_as_prompt_when_unpriced() -> None:
    usage = Usage(input_tokens=1000, output_tokens=100, cache_read_tokens=400)
    assert ModelPrices(2.0, 8.0, 0.5).cost(usage) == pytest.approx((600 * 2 + 400 * 0.5 + 100 * 8) / 1e6)
    assert ModelPrices(2.0, 8.0).cost(usage) == pytest.approx((1000 * 2 + 100 * 8) / 1e6)
    # A provider reporting more cache reads than prompt tokens does not make the cost negative.
    assert ModelPrices(1.0, 0.0, 0.0).cost(Usage(input_tokens=10, cache_read_tokens=50)) == 0.0


async def test_a_model_the_server_does_not_serve_is_rejected_at_once() -> None:
    async with FakeOpenAI(served=["fake-model"]) as fake, _client(fake) as client:
        with pytest.raises(ModelRejectedError) as caught:
            await client.chat(HELLO, model="nope")
        assert "does not serve the model" in str(caught.value) and "/model" in str(caught.value)
        assert len(fake.chat_requests) == 1  # not retried
        assert (await client.chat(HELLO)).content == "echo: hi"
        listed = (await client._http.get(f"{fake.base_url}/models")).json()
        assert [m["id"] for m in listed["data"]] == ["fake-model"]


@pytest.mark.parametrize("status,body", [
    (404, {"error": "model 'llama9' not found, try pulling it first"}),  # Ollama
    (404, {"object": "error", "message": "The model `x` does not exist.", "type": "NotFoundError", "code": 404}),
    (400, {"error": {"message": "x is not a valid model ID", "code": 400}}),  # OpenRouter
    (400, {"error": {"message": "bad", "code": "model_not_found"}}),
])
async def test_the_ways_servers_say_unknown_model(status: int, body: object) -> None:
    async with FakeOpenAI() as fake, _client(fake) as client:
        fake.respond(status, body)
        with pytest.raises(ModelRejectedError):
            await client.chat(HELLO)


@pytest.mark.parametrize("status,body", [
    (404, "<html>Not Found</html>"),
    (400, {"error": {"message": "messages: field required"}}),
])
async def test_other_refusals_are_not_a_rejected_model(status: int, body: object) -> None:
    async with FakeOpenAI() as fake, _client(fake) as client:
        fake.respond(status, body)
        with pytest.raises(ModelResponseError) as caught:
            await client.chat(HELLO)
        assert not isinstance(caught.value, ModelRejectedError)
