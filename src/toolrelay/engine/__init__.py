"""The async agent loop: feeds the core, runs tools, saves, emits events."""
