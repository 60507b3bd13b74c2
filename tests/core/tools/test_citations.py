"""Citation sources from tool results and terminal events from file tools (SPEC R11)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolrelay.core.events import Event
from toolrelay.core.tools.citations import (
    CITATION_TOOLS,
    TERMINAL_TOOLS,
    citation_sources,
    terminal_event,
)


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def test_citation_tools() -> None:
    assert (
        frozenset(
            {"search_web", "fetch_url", "view_file", "view_knowledge_file", "query_knowledge_files"}
        )
        == CITATION_TOOLS
    )


# ---------------------------------------------------------------- search_web


def test_search_web_is_one_source_with_a_document_per_result() -> None:
    text = dumps(
        [
            {"title": "Paris", "link": "https://a.example/paris", "snippet": "Capital of France"},
            {"title": "Lyon", "link": "https://b.example/lyon", "snippet": "Second city"},
            {"link": "https://c.example"},
        ]
    )
    assert citation_sources("search_web", {"query": "french cities"}, text) == [
        {
            "source": {"name": "french cities"},
            "document": ["Capital of France", "Second city", ""],
            "metadata": [
                {
                    "source": "https://a.example/paris",
                    "name": "Paris",
                    "url": "https://a.example/paris",
                },
                {
                    "source": "https://b.example/lyon",
                    "name": "Lyon",
                    "url": "https://b.example/lyon",
                },
                {"source": "https://c.example", "url": "https://c.example"},
            ],
        }
    ]


def test_search_web_accepts_wrapped_results_and_no_query() -> None:
    text = dumps({"results": [{"title": "T", "snippet": "S"}]})
    assert citation_sources("search_web", {}, text) == [
        {
            "source": {"name": "search_web"},
            "document": ["S"],
            "metadata": [{"source": "T", "name": "T"}],
        }
    ]


def test_search_web_with_no_results_cites_nothing() -> None:
    assert citation_sources("search_web", {"query": "q"}, "[]") == []


@pytest.mark.parametrize("text", ["not json", '{"a": 1}', "[1, 2]", '"str"'])
def test_search_web_odd_text_falls_back(text: str) -> None:
    assert citation_sources("search_web", {"query": "q"}, text) == [
        {
            "source": {"name": "search_web"},
            "document": [text],
            "metadata": [{"source": "search_web"}],
        }
    ]


# ---------------------------------------------------------------- fetch_url


def test_fetch_url_cites_the_first_500_characters() -> None:
    page = "x" * 499 + "yz" + "more"
    assert citation_sources("fetch_url", {"url": "https://e.example/p"}, page) == [
        {
            "source": {
                "name": "https://e.example/p",
                "id": "https://e.example/p",
                "url": "https://e.example/p",
            },
            "document": ["x" * 499 + "y"],
            "metadata": [
                {
                    "source": "https://e.example/p",
                    "name": "https://e.example/p",
                    "url": "https://e.example/p",
                }
            ],
        }
    ]


def test_fetch_url_without_url_argument() -> None:
    assert citation_sources("fetch_url", {"url": 5}, "short page") == [
        {
            "source": {"name": "fetch_url"},
            "document": ["short page"],
            "metadata": [{"source": "fetch_url"}],
        }
    ]


# ---------------------------------------------------------------- view_file


@pytest.mark.parametrize("tool", ["view_file", "view_knowledge_file"])
def test_view_file_cites_the_text_under_the_path(tool: str) -> None:
    assert citation_sources(tool, {"path": "docs/a.md"}, "# A\nbody") == [
        {
            "source": {"name": "docs/a.md", "id": "docs/a.md"},
            "document": ["# A\nbody"],
            "metadata": [{"source": "docs/a.md", "name": "docs/a.md"}],
        }
    ]


def test_view_file_reads_a_json_file_record() -> None:
    text = dumps({"id": "f1", "filename": "report.pdf", "content": "Q3 numbers"})
    assert citation_sources("view_knowledge_file", {"file_id": "f1"}, text) == [
        {
            "source": {"name": "report.pdf", "id": "f1"},
            "document": ["Q3 numbers"],
            "metadata": [{"source": "report.pdf", "name": "report.pdf", "file_id": "f1"}],
        }
    ]


def test_view_file_error_record_cites_nothing() -> None:
    assert citation_sources("view_file", {"path": "x"}, dumps({"error": "not found"})) == []


def test_view_file_without_a_name_falls_back() -> None:
    assert citation_sources("view_file", {}, "text", tool_id="files") == [
        {
            "source": {"name": "view_file", "id": "files"},
            "document": ["text"],
            "metadata": [{"source": "view_file"}],
        }
    ]


# ---------------------------------------------------------------- query_knowledge_files


def test_query_knowledge_files_groups_chunks_by_source() -> None:
    text = dumps(
        [
            {"source": "a.pdf", "content": "a1", "file_id": "fa"},
            {"file": "b.txt", "text": "b1"},
            {"source": "a.pdf", "content": "a2", "file_id": "fa"},
            {"content": "orphan"},
        ]
    )
    assert citation_sources("query_knowledge_files", {"query": "q"}, text) == [
        {
            "source": {"name": "a.pdf", "id": "fa", "type": "file"},
            "document": ["a1", "a2"],
            "metadata": [
                {"source": "a.pdf", "name": "a.pdf", "file_id": "fa"},
                {"source": "a.pdf", "name": "a.pdf", "file_id": "fa"},
            ],
        },
        {
            "source": {"name": "b.txt", "id": "b.txt", "type": "file"},
            "document": ["b1"],
            "metadata": [{"source": "b.txt", "name": "b.txt"}],
        },
        {
            "source": {"name": "Unknown", "id": "Unknown", "type": "file"},
            "document": ["orphan"],
            "metadata": [{"source": "Unknown", "name": "Unknown"}],
        },
    ]


def test_query_knowledge_files_keeps_distances_note_ids_and_chunk_types() -> None:
    text = dumps(
        [
            {"source": "a.pdf", "content": "a1", "file_id": "fa", "distance": 0.12},
            {"source": "Meeting", "content": "n1", "note_id": "n7", "type": "note"},
            {"source": "a.pdf", "content": "a2", "file_id": "fa", "distance": 0.34},
        ]
    )
    assert citation_sources("query_knowledge_files", {"query": "q"}, text) == [
        {
            "source": {"name": "a.pdf", "id": "fa", "type": "file"},
            "document": ["a1", "a2"],
            "metadata": [
                {"source": "a.pdf", "name": "a.pdf", "file_id": "fa"},
                {"source": "a.pdf", "name": "a.pdf", "file_id": "fa"},
            ],
            "distances": [0.12, 0.34],
        },
        {
            "source": {"name": "Meeting", "id": "n7", "type": "note"},
            "document": ["n1"],
            "metadata": [{"source": "Meeting", "name": "Meeting", "note_id": "n7"}],
        },
    ]


def test_query_knowledge_distances_stay_parallel_with_documents() -> None:
    """Issue 30 item 5 (R11): the first chunk has no distance, so `distances` holds null
    in its place; a source without any distance has none."""
    text = dumps(
        [
            {"source": "a.pdf", "content": "a1", "file_id": "fa"},
            {"source": "a.pdf", "content": "a2", "file_id": "fa", "distance": 0.5},
            {"source": "b.pdf", "content": "b1", "file_id": "fb", "distance": "far"},
        ]
    )
    sources = citation_sources("query_knowledge_files", {"query": "q"}, text)
    assert [s["document"] for s in sources] == [["a1", "a2"], ["b1"]]
    assert sources[0]["distances"] == [None, 0.5]
    assert "distances" not in sources[1]


def test_query_knowledge_files_groups_by_file_id_not_by_name() -> None:
    """Two files named alike are two sources; one file is one source (Open WebUI groups so)."""
    text = dumps(
        [
            {"source": "notes.md", "content": "x", "file_id": "f1"},
            {"source": "notes.md", "content": "y", "file_id": "f2"},
            {"source": "notes.md", "content": "z", "file_id": "f1"},
        ]
    )
    sources = citation_sources("query_knowledge_files", {}, text)
    assert [(s["source"]["id"], s["document"]) for s in sources] == [
        ("f1", ["x", "z"]),
        ("f2", ["y"]),
    ]


def test_view_knowledge_file_keeps_the_knowledge_name() -> None:
    text = dumps({"id": "f1", "filename": "r.pdf", "content": "Q3", "knowledge_name": "Finance"})
    (source,) = citation_sources("view_knowledge_file", {"file_id": "f1"}, text)
    assert source["metadata"] == [
        {"source": "r.pdf", "name": "r.pdf", "file_id": "f1", "knowledge_name": "Finance"}
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Error: connection refused",
        "error: 404",
        "Traceback (most recent call last):",
        '{"error": "x"}',
    ],
)
def test_error_results_cite_nothing(text: str) -> None:
    assert citation_sources("fetch_url", {"url": "https://a.b"}, text) == []
    assert citation_sources("some_tool", {}, text) == []


def test_query_knowledge_files_empty_and_odd() -> None:
    assert citation_sources("query_knowledge_files", {}, "[]") == []
    assert citation_sources("query_knowledge_files", {}, "[1]") == [
        {
            "source": {"name": "query_knowledge_files"},
            "document": ["[1]"],
            "metadata": [{"source": "query_knowledge_files"}],
        }
    ]


# ---------------------------------------------------------------- fallback


def test_other_tools_get_the_fallback_source() -> None:
    assert citation_sources("get_weather", {"city": "Paris"}, "sunny") == [
        {
            "source": {"name": "get_weather"},
            "document": ["sunny"],
            "metadata": [{"source": "get_weather"}],
        }
    ]
    assert citation_sources("get_weather", {}, "sunny", tool_id="wx") == [
        {
            "source": {"name": "get_weather", "id": "wx"},
            "document": ["sunny"],
            "metadata": [{"source": "get_weather"}],
        }
    ]


@pytest.mark.parametrize("tool", ["get_weather", *sorted(CITATION_TOOLS)])
@pytest.mark.parametrize("text", [None, ""])
def test_empty_results_cite_nothing(tool: str, text: str | None) -> None:
    assert citation_sources(tool, {"url": "u", "path": "p"}, text) == []


@given(
    st.sampled_from([*sorted(CITATION_TOOLS), "other"]),
    st.dictionaries(
        st.sampled_from(["url", "path", "query", "file_id"]), st.text() | st.integers()
    ),
    st.text() | st.from_type(type(None)),
)
def test_citation_sources_never_raise(tool: str, args: dict[str, Any], text: str | None) -> None:
    sources = citation_sources(tool, args, text)
    for source in sources:
        assert isinstance(source["source"]["name"], str)
        assert len(source["document"]) == len(source["metadata"])
        assert all(isinstance(d, str) for d in source["document"])


json_shaped = st.recursive(
    st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["title", "link", "snippet", "source", "content", "file_id", "error"]),
            inner,
        )
    ),
    max_leaves=8,
)


@given(st.sampled_from(sorted(CITATION_TOOLS)), json_shaped)
def test_citation_sources_never_raise_on_odd_json(tool: str, value: Any) -> None:
    for source in citation_sources(tool, {"path": "p"}, dumps(value)):
        assert len(source["document"]) == len(source["metadata"])
        assert all(isinstance(d, str) for d in source["document"])


# ---------------------------------------------------------------- terminal events


def test_terminal_tools_mapping() -> None:
    assert dict(TERMINAL_TOOLS) == {
        "display_file": "terminal:display_file",
        "write_file": "terminal:write_file",
        "replace_file_content": "terminal:write_file",
        "edit_file": "terminal:write_file",
        "run_command": "terminal:run_command",
    }


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("display_file", {"path": "/w/a.py"}, Event("terminal:display_file", {"path": "/w/a.py"})),
        (
            "display_file",
            {"path": "/w/a.pdf", "page": 3},
            Event("terminal:display_file", {"path": "/w/a.pdf", "page": 3}),
        ),
        ("display_file", {"path": "/w/a.py", "inline": True}, None),
        ("display_file", {}, None),
        (
            "write_file",
            {"path": "/w/b.py", "content": "x"},
            Event("terminal:write_file", {"path": "/w/b.py"}),
        ),
        (
            "replace_file_content",
            {"file_path": "/w/c"},
            Event("terminal:write_file", {"path": "/w/c"}),
        ),
        ("edit_file", {"path": "/w/d"}, Event("terminal:write_file", {"path": "/w/d"})),
        ("write_file", {"path": ""}, None),
        (
            "run_command",
            {"command": "ls -la", "cwd": "/w"},
            Event("terminal:run_command", {"path": "/w", "command": "ls -la"}),
        ),
        ("run_command", {}, Event("terminal:run_command", {})),
        ("search_web", {"path": "/w"}, None),
    ],
)
def test_terminal_event(tool: str, args: dict[str, Any], expected: Event | None) -> None:
    assert terminal_event(tool, args) == expected


def test_saved_sources_are_the_sources_the_events_gave() -> None:
    """A reloaded page gets a saved turn's citations again from its completed tool calls."""
    from toolrelay.core.tools.citations import citation_sources, saved_sources

    results = '[{"title": "T", "link": "https://e.org", "snippet": "s"}]'
    output = [
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "search_web",
            "arguments": '{"query": "q"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": results, "status": "completed"},
        {"type": "function_call", "call_id": "c2", "name": "add", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "3", "status": "completed"},
        {"type": "function_call", "call_id": "c3", "name": "fetch_url", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "c3",
            "output": "Error: 404",
            "status": "failed",
        },
    ]
    assert saved_sources(output) == citation_sources("search_web", {"query": "q"}, results)
    assert saved_sources(output)  # not empty: the search cites
    assert saved_sources(output[2:]) == []
