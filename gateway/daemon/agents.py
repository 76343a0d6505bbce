"""The agent ``core`` provides, as the daemon plugs it in: a fresh agent per message,
the compressor behind /compress, the memory flush before a reset and /btw's side answers."""

from __future__ import annotations

from core import AgentRuntime
from core.agent import Agent, TurnRequest
from core.llm import ModelClient
from core.tools import ToolOverview, ToolRegistry
from gateway.daemon.settings import agent_settings
from gateway.daemon.tools import tool_registry
from gateway.routing.services import Services
from gateway.routing.session_index import rebind_in_transaction


class DefaultAgents:
    """The full agent of ``core``: one runtime per daemon run, a fresh agent per message.

    Also the daemon's compressor (/compress) and its memory flush before a reset.
    """

    def __init__(self, client: ModelClient, *, registry: ToolRegistry | None = None) -> None:
        """``registry``: the agent's tools (None: those the config gives, ``tool_registry``); a test gives its own."""
        self._client = client
        self._registry = registry
        self._runtime: AgentRuntime | None = None

    def runtime(self, services: Services) -> AgentRuntime:
        if self._runtime is None:
            # The chat's key moves in the same transaction as a compression split.
            self._runtime = AgentRuntime(
                services.store, self._client, agent_settings(services.config), home=services.config.home,
                registry=self._registry if self._registry is not None else tool_registry(services.config),
                rebind_op=rebind_in_transaction, mcp=services.mcp,
            )
        return self._runtime

    def __call__(self, services: Services, request: TurnRequest) -> Agent:
        return self.runtime(services).agent(request)

    async def memory_flush(self, services: Services, session_id: str) -> None:
        """The agent's turn before an automatic reset: memories and skills, as the reference has it."""
        await self.runtime(services).memory_flush(session_id, skills=True)

    async def compress(self, services: Services, session_key: str, session_id: str) -> str:
        return (await self.runtime(services).compress(session_key, session_id)).reply

    async def side_answer(self, services: Services, session_id: str, platform: str, chat_type: str,
                          question: str, *, model: str | None = None) -> str:
        return await self.runtime(services).side_answer(session_id, platform, chat_type, question, model=model)

    def tool_overview(self, services: Services, platform: str, chat_type: str | None) -> ToolOverview:
        return self.runtime(services).tool_overview(platform, chat_type)

    async def aclose(self) -> None:
        if self._runtime is not None:
            await self._runtime.aclose()
