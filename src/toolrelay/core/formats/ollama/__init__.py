"""Ollama `/api/chat`: reading lines (`parse`) and the request body and its messages (`request`)."""
