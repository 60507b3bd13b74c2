"""Ollama `/api/chat`: the request body and its messages (`request`)."""
