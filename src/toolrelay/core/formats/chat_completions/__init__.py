"""OpenAI Chat Completions: reading chunks (`parse`), writing answers (`render`), request bodies (`request`)."""
