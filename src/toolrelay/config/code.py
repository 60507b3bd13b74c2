"""`[code_interpreter]`: whether and how the server runs the code models write.

    [code_interpreter]
    engine = "jupyter"        # "jupyter" | "subprocess" | "off" (the default)
    users = "admins"          # who may run code: "admins" or "everyone"
    timeout = 30              # a run's default seconds; a call may ask up to max_timeout
    max_kernels = 8           # kernels at once (one per chat); one more chat gets an error
    memory_mb = 2048          # and cpu_seconds, open_files, processes, file_mb, network
    sandbox = "full"          # "basic": limits only, for one trusted user without root

A route takes part unless it says `code_interpreter = false` (the route gate
of SPEC R5). `build_code_runner` turns this into a live runner; it imports
`jupyter_client` only for the jupyter engine and says which extra is missing,
and it stops the start (`ConfigError`) when the host cannot give the sandbox
asked for: code never runs less isolated than configured.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolrelay.errors import ConfigError, ToolError

__all__ = ["CodeInterpreterConfig", "build_code_runner"]

_MB = 1024 * 1024


class CodeInterpreterConfig(BaseModel):
    """The code interpreter's settings (module doc); `engine = "off"` turns it off."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: Literal["jupyter", "subprocess", "off"] = "off"
    users: Literal["admins", "everyone"] = "admins"
    """Who may run code; admins always may (the user gate of SPEC R5)."""
    timeout: float = Field(default=30.0, gt=0)
    max_timeout: float = Field(default=300.0, gt=0)
    max_kernels: int = Field(default=8, ge=1, le=999)
    idle_timeout: float = Field(default=600.0, gt=0)
    """Seconds a chat's kernel may sit unused before it is shut down."""
    cpu_seconds: int = Field(default=600, ge=1)
    memory_mb: int = Field(default=2048, ge=64)
    open_files: int = Field(default=256, ge=32)
    processes: int = Field(default=64, ge=8)
    file_mb: int = Field(default=256, ge=1)
    network: bool = False
    """False: the code gets no network at all (a namespace with only a loopback)."""
    sandbox: Literal["full", "basic"] = "full"
    """"full": root, bubblewrap, a user and namespaces per kernel (docs/code-interpreter.md);
    "basic": limits, a clean environment and a working directory only, as the server's own
    user: for one trusted user on a host without root, never with `users = "everyone"`."""
    dir: Path | None = None
    """Where each chat's directory lives; default `<data_dir>/code`."""

    @property
    def enabled(self) -> bool:
        return self.engine != "off"


def build_code_runner(
    config: CodeInterpreterConfig, data_dir: Path, config_file: Path | None = None
) -> Any:
    """The live runner of `config` (None when off); hides `data_dir` and `config_file`
    (it may hold `admin_key`) from the code."""
    if not config.enabled:
        return None
    if config.sandbox == "basic" and config.users == "everyone":
        raise ConfigError(
            "code_interpreter.sandbox = 'basic' runs code as the server's own user: "
            "it is for one trusted user, not users = 'everyone'"
        )
    if config.sandbox == "basic" and os.geteuid() == 0:
        raise ConfigError(
            "code_interpreter.sandbox = 'basic' would run code as root: "
            "use 'full' (install bubblewrap)"
        )
    try:
        return _build(config, data_dir, config_file)
    except ToolError as exc:  # SandboxUnavailable: what this host lacks
        raise ConfigError(f"code_interpreter: {exc}") from None


def _build(config: CodeInterpreterConfig, data_dir: Path, config_file: Path | None) -> Any:
    from toolrelay.adapters.code.sandbox import SandboxLimits

    limits = SandboxLimits(
        cpu_seconds=config.cpu_seconds,
        memory_bytes=config.memory_mb * _MB,
        open_files=config.open_files,
        processes=config.processes,
        file_bytes=config.file_mb * _MB,
        network=config.network,
    )
    root = config.dir or data_dir / "code"
    hide = [data_dir, root]  # the database, keys and every chat's files
    if config_file is not None:
        hide.append(config_file)
    if config.engine == "subprocess":
        from toolrelay.adapters.code.subprocess import SandboxedSubprocess

        return SandboxedSubprocess(
            root, limits=limits, timeout=config.max_timeout, hide=hide, level=config.sandbox
        )
    missing = [m for m in ("jupyter_client", "ipykernel") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            f"code_interpreter.engine = 'jupyter' needs the code extra ({', '.join(missing)} "
            "not installed): pip install 'toolrelay[code]'"
        )
    from toolrelay.adapters.code import JupyterRunner

    return JupyterRunner(
        root,
        limits=limits,
        timeout=config.timeout,
        max_timeout=config.max_timeout,
        max_kernels=config.max_kernels,
        idle_timeout=config.idle_timeout,
        hide=hide,
        level=config.sandbox,
    )
