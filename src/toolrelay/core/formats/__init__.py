"""Wire formats, in one place: every byte toolrelay reads from or writes to an OpenAI-
or Ollama-shaped peer is defined here, sans-IO (no sockets, no asyncio, no server).

Who uses it: the model clients (`adapters.models.*`) build request bodies with
`*.request`; the server's routes render answers, chunks and events with
`*.render` and never build one by hand; the test doubles (`toolrelay.testing`)
build what real model servers send with the same renderers.

Layout, one sub-package per API:

- `chat_completions`: OpenAI Chat Completions. `parse` (chunks -> deltas),
  `render` (chunks, the completion body, a turn's streamed answer),
  `request` (the upstream request body).
- `responses`: OpenAI Responses. `parse` (the pure event reducer), `render`
  (the `response` object, numbered events, a turn's streamed answer),
  `convert` (input items <-> Chat messages, flat tools), `request` (the
  upstream request body).
- `ollama`: Ollama `/api/chat`. `parse` (lines -> deltas), `request`
  (messages and body).

`transcript` turns a turn's items back into what a provider reads next (Chat
messages or Responses input items).

Shared by all three: `answer` (a finished turn -> what an OpenAI answer says:
the one place that decides finish reasons and statuses), `sse` (SSE framing of
what we send), `error_message` (the human message inside any error payload),
`content` (a body's framing from its content type and first bytes) and
`params` (a client's sampling parameters named as the upstream API names them).
"""
