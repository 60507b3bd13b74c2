"""Append-only named migrations: `NNNN_name.py`, revision id equal to the file's stem."""
