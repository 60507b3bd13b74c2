"""A model response as it streams: bytes -> frames -> deltas or events -> output items + client events.

Framing, the two input modes' accumulators, the inline-tag splitter and `BodyReader`
(`reader`), which chains them for one whole body. A new provider's wire shape goes in
`core.formats`, not here.
"""
