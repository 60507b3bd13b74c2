"""Configuration: settings from the file and the environment, and the live objects they name.

`settings` (the shape and `load_settings`; one model route's in `model_route`),
`sources` (where values come from), `messages` (errors as one line per problem)
and `registry` (model clients, tools, filters, limits). The server and the CLI
both start here; this package imports neither (docs/architecture.md).
"""

from toolrelay.config.registry import Registry, build_registry, setup_hint
from toolrelay.config.settings import LimitsConfig, ModelRoute, Settings, load_settings

__all__ = [
    "LimitsConfig",
    "ModelRoute",
    "Registry",
    "Settings",
    "build_registry",
    "load_settings",
    "setup_hint",
]
