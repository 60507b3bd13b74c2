"""The sans-IO heart of toolrelay.

Bytes in, frames, provider deltas, output items and events out. Nothing here
awaits, opens a socket, touches a database or reads a clock it was not given:
a test imports this package in a fresh interpreter and checks that httpx,
asyncio and sqlalchemy stay unloaded.
"""
