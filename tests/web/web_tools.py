"""Server-side tools the web page tests configure (loaded by `toolrelay serve` by path)."""

import json
from typing import Any

from toolrelay import tool

HOSTILE_HTML = (
    "<h3>chart</h3><script>parent.postMessage('embed-script-ran','*');"
    "try{parent.document.title='pwned'}catch(e){}</script>"
    "<img src=x onerror=\"parent.postMessage('embed-onerror-ran','*')\">"
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs the user's approval)."""
    return f"deleted {path}"


@tool
def search_web(query: str) -> str:
    """Search the web."""
    results = [
        {
            "title": "Relay race - Encyclopedia",
            "link": "https://example.org/relay",
            "snippet": "A relay race is a team race.",
        },
        {
            "title": "Baton passing",
            "link": "https://example.com/baton",
            "snippet": "Pass the baton in the zone.",
        },
    ]
    return json.dumps(results)


@tool
def show_chart() -> tuple[str, dict[str, str]]:
    """Show a chart to the user."""
    return HOSTILE_HTML, {"Content-Type": "text/html", "Content-Disposition": "inline"}


@tool
def hostile_text() -> str:
    """A tool whose result is hostile HTML."""
    return '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


@tool
def long_report() -> str:
    """Write a long report (longer than the model may read of one result)."""
    return "".join(f"line {i:06d} of the report\n" for i in range(6000))


@tool
async def inspect_argon(__event_emitter__: Any = None) -> str:
    """Look argon up, telling the chat what happens (issue 29 item 2)."""
    await __event_emitter__({"type": "status", "data": {"description": "Reading the handbook"}})
    await __event_emitter__(
        {
            "type": "citation",
            "data": {
                "document": ["Argon is a noble gas."],
                "metadata": [{"source": "https://example.org/argon"}],
                "source": {"name": "Argon handbook", "url": "https://example.org/argon"},
            },
        }
    )
    await __event_emitter__({"type": "message", "data": {"content": "draft"}})
    await __event_emitter__({"type": "replace", "data": {"content": "Argon: found."}})
    await __event_emitter__({"type": "status", "data": {"description": "Checked 1 source"}})
    return "argon: noble gas"
