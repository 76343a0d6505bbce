"""Where a setting is read: config.yaml + .env + the environment, validated once at start.

``models`` is the shape of config.yaml (the platforms' sections are the adapters' own settings
models), ``loading`` the precedence (environment > .env > config.yaml > defaults), ``envfile``
the .env file, ``suggest`` the error messages ("did you mean …"), ``reference`` the README's
settings tables, ``aliases`` the reference's names for settings that live elsewhere here, ``cluster`` several
nodes over one PostgreSQL database.
"""

from gateway.config.aliases import REFERENCE_ALIASES, ReferenceAlias
from gateway.config.cluster import ClusterConfig
from gateway.config.cron import CronConfig
from gateway.config.envfile import read_dotenv
from gateway.config.loading import PAIRING_KEY_ENV, LoadedConfig, default_home, env_sections, load_config
from gateway.config.mcp import mcp_secrets, mcp_specs
from gateway.config.model_list import AllowedModel, ModelsConfig, PricesConfig
from gateway.config.models import (
    AgentConfig,
    AuthConfig,
    DisplayConfig,
    GatewayConfig,
    LoggingConfig,
    MediaConfig,
    ModelConfig,
    ModelPrice,
    PlatformsConfig,
    SessionResetConfig,
    SessionsConfig,
    SessionSearchConfig,
    Settings,
    StorageConfig,
    StreamingConfig,
    SttConfig,
    ToolsetsConfig,
    TtsConfig,
    secret_values,
)
from gateway.config.reference import settings_table
from gateway.config.suggest import closest, known_keys
from gateway.errors import EX_CONFIG, ConfigError

__all__ = [
    "EX_CONFIG",
    "PAIRING_KEY_ENV",
    "REFERENCE_ALIASES",
    "AgentConfig",
    "AllowedModel",
    "AuthConfig",
    "ClusterConfig",
    "ConfigError",
    "CronConfig",
    "DisplayConfig",
    "GatewayConfig",
    "LoadedConfig",
    "LoggingConfig",
    "MediaConfig",
    "ModelConfig",
    "ModelPrice",
    "ModelsConfig",
    "PlatformsConfig",
    "PricesConfig",
    "ReferenceAlias",
    "SessionResetConfig",
    "SessionSearchConfig",
    "SessionsConfig",
    "Settings",
    "StorageConfig",
    "StreamingConfig",
    "SttConfig",
    "ToolsetsConfig",
    "TtsConfig",
    "closest",
    "default_home",
    "env_sections",
    "known_keys",
    "load_config",
    "mcp_secrets",
    "mcp_specs",
    "read_dotenv",
    "secret_values",
    "settings_table",
]
