"""Code interpreters: Jupyter kernels per chat, and a sandboxed subprocess (needs `[code]`).

`JupyterRunner` (jupyter_client + ipykernel) and the sandbox they run in
(`SandboxLimits`). Import this package only when code running is on: it
imports jupyter_client.
"""

from toolrelay.adapters.code.kernels import PoolFull
from toolrelay.adapters.code.runner import JupyterRunner
from toolrelay.adapters.code.sandbox import SandboxLimits, SandboxUnavailable, isolation

__all__ = ["JupyterRunner", "PoolFull", "SandboxLimits", "SandboxUnavailable", "isolation"]
