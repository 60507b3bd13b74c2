"""Concrete implementations of the engine's interfaces: models, tools, stores, event sinks.

The engine only sees the Protocols in `toolrelay.engine.interfaces`; everything
that does I/O or knows a vendor's format lives under here.
"""
