"""core.prompt.rag: one context block per request, rebuilt from the pre-RAG snapshot."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolrelay.core.formats.transcript import TOOL_IMAGES_TEXT
from toolrelay.core.prompt.rag import (
    DEFAULT_TEMPLATE,
    RagSnapshot,
    inject,
    render_sources,
    take_snapshot,
)

TEMPLATE = "CTX[{{CONTEXT}}]"

FILE_SOURCE: dict[str, Any] = {
    "source": {"id": "file-1", "name": "notes.md", "type": "file"},
    "document": ["alpha text", "beta text"],
    "metadata": [{"source": "notes.md", "name": "notes.md"}, {"source": "notes.md"}],
}
TOOL_SOURCE: dict[str, Any] = {
    "source": {"id": "https://x.test/a", "name": "https://x.test/a"},
    "document": ["fetched body that must not be repeated"],
    "metadata": [{"source": "https://x.test/a", "name": "Page A", "url": "https://x.test/a"}],
}

FILE_TAGS = (
    '<source id="1" name="notes.md">alpha text</source>\n'
    '<source id="1" name="notes.md">beta text</source>'
)
TOOL_TAG = '<source id="2" name="Page A" url="https://x.test/a"></source>'


def conversation() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": "What is in my notes?"},
    ]


def test_snapshot_takes_system_last_user_and_copies_sources() -> None:
    sources = [copy.deepcopy(FILE_SOURCE)]
    snapshot = take_snapshot(conversation(), sources)
    assert snapshot == RagSnapshot(
        system="Be brief.", user="What is in my notes?", sources=(FILE_SOURCE,)
    )
    sources[0]["document"].append("later")
    assert snapshot.sources == (FILE_SOURCE,)


def test_snapshot_skips_tool_image_messages_and_reads_list_content() -> None:
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe"},
                {"type": "image_url", "image_url": {"url": "u"}},
                {"type": "text", "text": "this"},
            ],
        },
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "c", "content": ""},
        {"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES_TEXT}]},
    ]
    assert take_snapshot(messages, []) == RagSnapshot(
        system=None, user="Describe\nthis", sources=()
    )


def test_inject_file_and_tool_sources_into_the_user_prompt() -> None:
    messages = conversation()
    snapshot = take_snapshot(messages, [FILE_SOURCE])
    injected = inject(messages, snapshot, tool_sources=[TOOL_SOURCE], template=TEMPLATE)
    assert injected == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
        {
            "role": "user",
            "content": f"CTX[{FILE_TAGS}\n{TOOL_TAG}]\n\nWhat is in my notes?",
        },
    ]
    assert messages == conversation()


def test_default_template_wraps_context() -> None:
    snapshot = take_snapshot([{"role": "user", "content": "q"}], [FILE_SOURCE])
    content = inject([{"role": "user", "content": "q"}], snapshot)[0]["content"]
    block = DEFAULT_TEMPLATE.replace("{{CONTEXT}}", FILE_TAGS)
    assert content == f"{block}\n\nq"


def test_query_placeholder_and_braces_in_sources_are_literal() -> None:
    source = {"source": {"id": "s"}, "document": ["{{QUERY}} stays"], "metadata": [{}]}
    snapshot = take_snapshot([{"role": "user", "content": "q"}], [source])
    content = inject([{"role": "user", "content": "q"}], snapshot, template="{{QUERY}}|{{CONTEXT}}")
    assert content[0]["content"] == 'q|<source id="1">{{QUERY}} stays</source>\n\nq'


def test_iterations_rebuild_from_snapshot_without_stacking() -> None:
    messages = conversation()
    snapshot = take_snapshot(messages, [FILE_SOURCE])
    round_one = inject(messages, snapshot, template=TEMPLATE)
    round_one += [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "page"},
        {"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES_TEXT}]},
    ]
    round_two = inject(round_one, snapshot, tool_sources=[TOOL_SOURCE], template=TEMPLATE)
    assert round_two[3] == {
        "role": "user",
        "content": f"CTX[{FILE_TAGS}\n{TOOL_TAG}]\n\nWhat is in my notes?",
    }
    assert round_two[4:] == round_one[4:]
    assert sum(str(m["content"]).count("CTX[") for m in round_two) == 1


def test_list_content_keeps_images_in_place() -> None:
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                {"type": "text", "text": "What is this?"},
            ],
        }
    ]
    snapshot = take_snapshot(messages, [FILE_SOURCE])
    once = inject(messages, snapshot, template=TEMPLATE)
    assert once == [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                {"type": "text", "text": f"CTX[{FILE_TAGS}]\n\nWhat is this?"},
            ],
        }
    ]
    assert inject(once, snapshot, template=TEMPLATE) == once


def test_system_prompt_restored_from_snapshot() -> None:
    snapshot = take_snapshot(conversation(), [FILE_SOURCE])
    drifted = conversation()
    drifted[0] = {"role": "system", "content": "Be brief.\nOLD CONTEXT"}
    assert inject(drifted, snapshot, template=TEMPLATE)[0] == {
        "role": "system",
        "content": "Be brief.",
    }


def test_without_user_prompt_the_block_goes_into_the_system_message() -> None:
    snapshot = take_snapshot([{"role": "system", "content": "Sys"}], [FILE_SOURCE])
    once = inject([{"role": "system", "content": "Sys"}], snapshot, template=TEMPLATE)
    assert once == [{"role": "system", "content": f"Sys\n\nCTX[{FILE_TAGS}]"}]
    assert inject(once, snapshot, template=TEMPLATE) == once

    bare = take_snapshot([], [FILE_SOURCE])
    assert inject([{"role": "assistant", "content": "a"}], bare, template=TEMPLATE) == [
        {"role": "system", "content": f"CTX[{FILE_TAGS}]"},
        {"role": "assistant", "content": "a"},
    ]


def test_no_sources_means_no_block_but_prompt_is_restored() -> None:
    snapshot = take_snapshot(conversation(), [])
    drifted = conversation()
    drifted[3] = {"role": "user", "content": "CTX[old]\n\nWhat is in my notes?"}
    assert inject(drifted, snapshot, template=TEMPLATE) == conversation()


def test_render_sources_markers_once_and_escaped() -> None:
    source = {
        "source": {"id": "t", "name": 'a "quoted" <name>'},
        "document": ["one", "two"],
        "metadata": [{}, {}],
    }
    assert render_sources([source], include_content=False) == (
        '<source id="1" name="a &quot;quoted&quot; &lt;name&gt;"></source>'
    )
    assert render_sources([{"source": {}}]) == '<source id="1"></source>'


# ---- idempotence ---------------------------------------------------------------------

_text = st.text(alphabet="abc xyz\n{}<>", max_size=12)
_part = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _text),
    st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, _text),
)
_content = st.one_of(_text, st.lists(_part, max_size=3), st.none())
_message = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["system", "user", "assistant", "tool"]),
    _content,
)
_source = st.builds(
    lambda sid, name, docs: {
        "source": {"id": sid, "name": name},
        "document": docs,
        "metadata": [{"source": sid, "name": name} for _ in docs],
    },
    _text,
    _text,
    st.lists(_text, max_size=3),
)


@given(
    original=st.lists(_message, max_size=6),
    drift=st.lists(_message, max_size=4),
    sources=st.lists(_source, max_size=3),
    tool_sources=st.lists(_source, max_size=3),
    template=st.sampled_from([DEFAULT_TEMPLATE, TEMPLATE, "{{QUERY}}:{{CONTEXT}}"]),
)
def test_inject_is_idempotent(
    original: list[dict[str, Any]],
    drift: list[dict[str, Any]],
    sources: list[dict[str, Any]],
    tool_sources: list[dict[str, Any]],
    template: str,
) -> None:
    snapshot = take_snapshot(original, sources)
    before = copy.deepcopy(original)
    once = inject(original + drift, snapshot, tool_sources=tool_sources, template=template)
    twice = inject(once, snapshot, tool_sources=tool_sources, template=template)
    assert twice == once
    assert original == before
    for _ in range(3):
        twice = inject(twice, snapshot, tool_sources=tool_sources, template=template)
    assert twice == once


def _all_text(messages: list[dict[str, Any]]) -> str:
    chunks: list[str] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            chunks.append(content)
        elif isinstance(content, list):
            chunks += [p.get("text", "") for p in content]
    return "\n".join(chunks)


@given(
    original=st.lists(_message, max_size=6),
    sources=st.lists(_source, min_size=1, max_size=3),
    rounds=st.integers(min_value=1, max_value=4),
)
def test_exactly_one_block_after_any_number_of_rounds(
    original: list[dict[str, Any]], sources: list[dict[str, Any]], rounds: int
) -> None:
    snapshot = take_snapshot(original, sources)
    messages = original
    for _ in range(rounds):
        messages = inject(messages, snapshot, template=TEMPLATE) + [
            {"role": "tool", "tool_call_id": "c", "content": "r"}
        ]
    assert _all_text(messages).count("CTX[") == 1
