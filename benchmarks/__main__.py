"""Run every benchmark and print its table."""

from __future__ import annotations

import argparse
import importlib

SUITES = (
    "core_stream",
    "text_tool_calls",
    "engine_loop",
    "http_stacks",
    "server_load",
    "server_late",
    "chat_memory",
    "chat_load",
    "tool_sources",
    "many_tools",
    "long_history",
    "many_chats",
    "big_results",
    "local_model",
    "code_interpreter",
    "bus_publish",
    "checkpoints",
)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("suites", nargs="*", default=list(SUITES), help=f"any of {SUITES}")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (smoke run)")
    args = parser.parse_args()
    for name in args.suites:
        module = importlib.import_module(f"benchmarks.{name}")
        module.run(quick=args.quick)


if __name__ == "__main__":
    main()
