"""Tool calls a model writes as text in its content (issue 14), in both input modes.

`parse` says what a call is, `recogniser` holds back text that may become one while
it streams, `stage` puts that between the translator and the accumulator of either input mode,
and `replay` writes a turn's calls back as text for such a model.
"""
