// A chat's event stream (GET /api/chats/{id}/events, SSE) read with fetch, so that
// errors have a status and reconnects carry Last-Event-ID themselves.
//
// The stream ends on its own once a turn (and its background tasks) ended; a turn
// paused for an answer has not, and its rest follows on the same stream. While a turn
// runs, a dropped connection is resumed from the last event id seen, so no event is
// lost or repeated. WHATWG SSE framing: fields `id`, `event`, `data`, `retry`.
//
// A delta's frame is lean (docs/events.md): its `data` has no `type` (the `event:` line
// names it) and no `item_id`, `output_index`, `content_index` when they are the previous
// delta's on this connection; `dispatch` fills them in, so `onEvent` gets whole events.

export class ChatStream {
  constructor(chatId, { onEvent, onStatus, lastId = null }) {
    this.chatId = chatId;
    this.onEvent = onEvent;
    this.onStatus = onStatus || (() => {});
    this.lastId = lastId;
    this.closed = false;
    this.controller = null;
    this.running = false;
    this.attempt = 0;
    this.place = {}; // the previous delta's item_id, output_index, content_index
  }

  // Read until the server ends the stream; reconnect while `wantMore()` says a turn runs.
  async run(wantMore) {
    while (!this.closed) {
      let ended = false;
      try {
        await this.readOnce();
        ended = true;
        this.attempt = 0;
      } catch (err) {
        if (this.closed) return;
        if (err && err.status === 401) { this.onStatus("unauthorized", err); return; }
        if (err && err.status && err.status !== 503) { this.onStatus("failed", err); return; }
        this.onStatus("reconnecting", err);
      }
      if (this.closed) return;
      if (ended && !wantMore()) { this.onStatus("idle"); return; }
      this.attempt += 1;
      await sleep(Math.min(250 * 2 ** Math.min(this.attempt, 5), 5000));
    }
  }

  async readOnce() {
    this.controller = new AbortController();
    const headers = { Accept: "text/event-stream" };
    if (this.lastId !== null) headers["Last-Event-ID"] = this.lastId;
    const response = await fetch(`/api/chats/${encodeURIComponent(this.chatId)}/events`, {
      headers, credentials: "same-origin", signal: this.controller.signal, cache: "no-store",
    });
    if (!response.ok) {
      const err = new Error(`events: HTTP ${response.status}`);
      err.status = response.status;
      throw err;
    }
    this.onStatus("open");
    this.place = {}; // a new connection names its first delta's place
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let frame = { id: null, event: null, data: [] };
    let count = 0;
    let slice = performance.now();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      slice = performance.now();
      buffer += value;
      let start = 0;
      for (;;) {
        const nl = buffer.indexOf("\n", start);
        if (nl < 0) break;
        let line = buffer.slice(start, nl);
        start = nl + 1;
        if (line.endsWith("\r")) line = line.slice(0, -1);
        if (line === "") {
          if (frame.data.length) this.dispatch(frame);
          frame = { id: null, event: null, data: [] };
          if (++count % 8 === 0 && performance.now() - slice > SLICE_MS) {
            await yieldToBrowser(); // a burst of thousands of events: let frames render
            slice = performance.now();
          }
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "data") frame.data.push(val);
        else if (field === "id") frame.id = val;
        else if (field === "event") frame.event = val;
      }
      buffer = buffer.slice(start);
    }
  }

  dispatch(frame) {
    if (this.closed) return; // closed while a chunk's frames were being read
    let event;
    try { event = JSON.parse(frame.data.join("\n")); } catch (_) { return; }
    const lean = !event.type; // a delta's frame: its type on the `event:` line
    if (lean) event.type = frame.event || "";
    if (DELTAS.has(event.type)) {
      const data = event.data || {};
      if ("item_id" in data) {
        this.place = { item_id: data.item_id, output_index: data.output_index };
        if ("content_index" in data) this.place.content_index = data.content_index;
      } else if (lean) event.data = { ...this.place, ...data };
    }
    if (frame.id !== null) this.lastId = frame.id;
    this.onEvent(event, frame.id);
  }

  close() {
    this.closed = true;
    if (this.controller) this.controller.abort();
  }
}

const SLICE_MS = 3;
const DELTAS = new Set([
  "response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta",
]);

// A macrotask, not `scheduler.yield()`: its continuation would outrank rendering, and a
// burst would be parsed to the end before the first frame is drawn.
function yieldToBrowser() {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }
