"""From the validated config to the settings objects of the core and storage parts the daemon builds.

The adapters need no translation: ``platforms.<name>`` is the adapter's own settings model."""

from __future__ import annotations

from core import AgentSettings
from core.llm import ModelSettings
from core.tools import GroupToolPolicy, ToolsetPolicy
from gateway.config import LoadedConfig
from gateway.routing.session_key import SessionKeySettings
from storage import StateStore, Store, WriterSettings


def key_settings(config: LoadedConfig) -> SessionKeySettings:
    """The chat -> session key rules: the router, /handoff, the control socket and the terminal chat use these."""
    g = config.settings.gateway
    return SessionKeySettings(
        group_sessions_per_user=g.group_sessions_per_user,
        thread_sessions_per_user=g.thread_sessions_per_user,
    )


def writer_settings(config: LoadedConfig) -> WriterSettings:
    s = config.settings.storage
    return WriterSettings(
        batch_limit=s.batch_limit,
        queue_limit=s.queue_limit,
        checkpoint_every_commits=s.checkpoint_every_commits,
        checkpoint_every_seconds=s.checkpoint_every_seconds,
        busy_retry_budget=s.busy_retry_budget,
        synchronous=s.synchronous,
        index_lag_max=s.index_lag_max,
    )


def model_settings(config: LoadedConfig) -> ModelSettings:
    m = config.settings.model
    return ModelSettings(
        base_url=m.base_url,
        api_key=m.api_key.get_secret_value() if m.api_key else None,
        model=m.default,
        auxiliary_model=m.auxiliary,
        timeout=m.timeout,
        max_retries=m.max_retries,
        max_retry_after=m.max_retry_after,
        turn_timeout=m.turn_timeout,
        max_response_bytes=m.max_response_bytes,
        cache_ttl=m.cache_ttl,
        stream=m.stream,
        tool_format=m.tool_format,
        tool_formats={e.name: e.tool_format for e in config.settings.models.allowed if e.tool_format},
    )


def agent_settings(config: LoadedConfig) -> AgentSettings:
    a = config.settings.agent
    recall = config.settings.session_search
    # Recall follows /resume: where any chat may resume any session, hiding them from search protects nothing.
    everything = recall.scope == "all" or config.settings.sessions.allow_cross_user_resume
    return AgentSettings(
        max_iterations=a.max_iterations,
        context_length=config.settings.model.context_length,
        compression_threshold=a.compression_threshold,
        tail_tokens=a.tail_tokens,
        memory_nudge_interval=a.memory_nudge_interval,
        skill_nudge_interval=a.skill_nudge_interval,
        review_max_iterations=a.review_max_iterations,
        auto_title=a.auto_title,
        session_search_scope="all" if everything else "own",
        session_search_owners=frozenset(recall.owners),
        # names only: a skill that requires a variable is shown when it is set here or in .env
        env_names=frozenset(name for name, value in config.env.items() if value),
        toolsets={
            platform: ToolsetPolicy(frozenset(t.enabled) if t.enabled is not None else None, frozenset(t.disabled))
            for platform, t in a.toolsets.items()
        },
        groups=GroupToolPolicy(terminal=config.settings.tools.groups.terminal,
                               file_writes=config.settings.tools.groups.file_writes),
    )


def make_store(config: LoadedConfig, *, daemon: bool = True) -> Store:
    """The store ``storage.url`` names, not opened yet: state.db (the default) or PostgreSQL.

    PostgreSQL is imported only here, so a SQLite deployment never loads its driver. Each node
    names its connections after itself (``application_name``): the database then tells which
    node holds a running job, and whether that node is still connected.
    """
    url = config.storage_url
    if url.backend == "sqlite":
        assert url.path is not None
        return StateStore(url.path, writer_settings=writer_settings(config) if daemon else None)
    from storage.postgres import PgStore

    node = config.settings.cluster.effective_node_id()
    return PgStore(url, connect_timeout=config.settings.storage.connect_timeout,
                   application_name=f"hermes-gateway/{node}"[:63] if daemon else "hermes-gateway/cli")
