"""Docstring reading for tool specs (each style through `@tool` is in test_python)."""

from __future__ import annotations

from toolrelay.adapters.tools.docstrings import parse_docstring


def test_parse_docstring_edge_cases() -> None:
    assert parse_docstring(None).description == ""
    assert parse_docstring("").params == {}
    only_args = parse_docstring("\n    Args:\n        a: first\n        b: second\n    ")
    assert only_args.description == ""
    assert only_args.params == {"a": "first", "b": "second"}
    section_without_blank = parse_docstring("Add numbers.\nArgs:\n    a: first")
    assert section_without_blank.description == "Add numbers."
    assert section_without_blank.params == {"a": "first"}


def test_a_docstring_mixing_the_three_styles_yields_every_parameter() -> None:
    doc = """Search the web.

    More about searching.

    Args:
        query: What to look for.

    Parameters
    ----------
    limit : int
        How many results.

    :param site: Only this site.
    """
    parsed = parse_docstring(doc)
    assert parsed.description == "Search the web."
    assert parsed.params == {
        "query": "What to look for.",
        "limit": "How many results.",
        "site": "Only this site.",
    }
