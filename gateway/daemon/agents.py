"""The agent ``core`` provides, as the daemon plugs it in: a fresh agent per message,
the compressor behind /compress and the memory flush before a reset."""

from __future__ import annotations

from core import AgentRuntime
from core.agent import Agent, TurnRequest
from core.llm import ModelClient
from core.tools import ToolRegistry
from gateway.daemon.settings import agent_settings
from gateway.routing.services import Services
from gateway.routing.session_index import rebind_in_transaction


class DefaultAgents:
    """The full agent of ``core``: one runtime per daemon run, a fresh agent per message.

    Also the daemon's compressor (/compress) and its memory flush before a reset.
    """

    def __init__(self, client: ModelClient, *, registry: ToolRegistry | None = None) -> None:
        """``registry``: the agent's tools (None: core's built-in set); a test gives its own here."""
        self._client = client
        self._registry = registry
        self._runtime: AgentRuntime | None = None

    def runtime(self, services: Services) -> AgentRuntime:
        if self._runtime is None:
            # The chat's key moves in the same transaction as a compression split.
            self._runtime = AgentRuntime(
                services.store, self._client, agent_settings(services.config), home=services.config.home,
                registry=self._registry, rebind_op=rebind_in_transaction,
            )
        return self._runtime

    def __call__(self, services: Services, request: TurnRequest) -> Agent:
        return self.runtime(services).agent(request)

    async def memory_flush(self, services: Services, session_id: str) -> None:
        """The agent's turn before an automatic reset: memories and skills, as the reference has it."""
        await self.runtime(services).memory_flush(session_id, skills=True)

    async def compress(self, services: Services, session_key: str, session_id: str) -> str:
        return (await self.runtime(services).compress(session_key, session_id)).reply

    async def aclose(self) -> None:
        if self._runtime is not None:
            await self._runtime.aclose()
