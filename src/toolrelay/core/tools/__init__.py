"""Tool calls and their results, sans-IO: parsing calls, shaping results, citations, OpenAPI operations.

What a tool returns becomes text for the model and files, sources and events for the
client here; running a tool is the engine's job and finding tools the adapters'.
"""
