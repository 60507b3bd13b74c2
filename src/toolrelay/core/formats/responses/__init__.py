"""OpenAI Responses: the event reducer (`parse`), answers (`render`), input conversions (`convert`), request bodies (`request`)."""
