"""OpenAI Chat Completions: what we write (`render`) and what we ask a model server for (`request`)."""
