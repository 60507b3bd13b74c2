"""OpenAI Responses: what we write (`render`), input conversions (`convert`), request bodies (`request`)."""
