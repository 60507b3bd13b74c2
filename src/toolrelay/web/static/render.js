// One assistant turn on screen, built from the chat's events (DESIGN §4) or a saved message.
//
// Events only change state and mark views dirty; the DOM is touched once per animation
// frame (`flush`), so thousands of small deltas cost a few renders. Every string from a
// model or a tool reaches the DOM as text (textContent) or through DOMPurify (Markdown);
// HTML embeds go into sandboxed iframes without allow-same-origin.
// The items' views are in item_views.js, the once-a-frame redraw queue in flush.js.

import { el, imageUrl, safeUrl } from "/static/dom.js";
import { schedule } from "/static/flush.js";
import { MessageItem, ReasoningItem, ToolCard } from "/static/item_views.js";

export { onFlushed } from "/static/flush.js";

// ------------------------------------------------------------------ the turn

export class TurnView {
  constructor(ctx) {
    this.ctx = ctx;
    this.node = el("article", "msg assistant");
    this.node.setAttribute("aria-label", "Answer");
    this.items = el("div", "items");
    this.embeds = el("div", "embeds");
    this.sources = el("ol", "sources");
    this.sources.hidden = true;
    this.errors = el("div", "errors");
    this.meta = el("div", "meta");
    this.followUps = el("div", "follow-ups");
    this.node.append(this.items, this.embeds, this.sources, this.errors, this.meta, this.followUps);
    this.byIndex = new Map();
    this.byItemId = new Map();
    this.cards = new Map();
    this.pendingOutputs = new Map();
    this.usage = null;
    this.started = performance.now();
    this.finished = false;
    this.sourceCount = 0;
    this.actions = [];
  }

  add(index, view, id) {
    this.byIndex.set(index, view);
    if (id) this.byItemId.set(id, view);
    this.items.append(view.node);
  }

  view(data) {
    return this.byItemId.get(data.item_id) || this.byIndex.get(data.output_index);
  }

  apply(event) {
    const data = event.data || {};
    switch (event.type) {
      case "response.output_item.added": return this.itemAdded(data.output_index, data.item || {});
      case "response.output_text.delta":
      case "response.reasoning_text.delta":
      case "response.function_call_arguments.delta": {
        const view = this.view(data);
        if (view) view.delta(data.delta || "");
        return;
      }
      case "response.function_call_arguments.done": {
        const view = this.view(data);
        if (view && view.argsDone) view.argsDone(data.arguments);
        return;
      }
      // `from_deltas`: the item comes without the text its deltas built here (already shown).
      case "response.output_item.done": return this.itemDone(data.output_index, data.item || {}, data.from_deltas);
      case "chat:completion": return data.done ? this.finish(data) : this.setUsage(data.usage);
      case "chat:message:error": return this.error(data.error && data.error.content);
      case "source": return this.addSource(data);
      case "tool:progress": {
        const card = this.cards.get(data.call_id);
        if (card) card.setProgress(data);
        return;
      }
      case "status": {
        const card = this.cards.get(data.call_id);
        if (card) card.setStatus(data);
        return;
      }
      case "chat:message": {
        const view = this.view(data);
        if (view && view.setText) view.setText(String(data.content || ""));
        return;
      }
      case "tool:approval": return this.later(() => this.approval(data));
      case "execute:tool": return this.later(() => this.clientTool(data));
      case "chat:message:follow_ups": return this.setFollowUps(data.follow_ups);
      case "chat:turn:resumed": return this.resumed(data.output || []);
      default: return;
    }
  }

  // Approval prompts and client tools wait for the end of the current batch of events:
  // replayed after a reload, their answer (the call's output) may already be in it.
  later(action) {
    this.actions.push(action);
    schedule(this);
  }

  itemAdded(index, item) {
    if (this.byIndex.has(index)) return;
    if (item.type === "message") this.add(index, new MessageItem(this), item.id);
    else if (item.type === "reasoning") this.add(index, new ReasoningItem(this), item.id);
    else if (item.type === "function_call") {
      const card = new ToolCard(this, item);
      this.cards.set(item.call_id, card);
      this.add(index, card, item.id);
      const early = this.pendingOutputs.get(item.call_id);
      if (early) card.setOutput(early);
    } else if (item.type === "function_call_output") this.itemDone(index, item);
  }

  itemDone(index, item, fromDeltas = false) {
    if (item.type === "function_call_output") {
      this.byIndex.set(index, null);
      const card = this.cards.get(item.call_id);
      if (card) card.setOutput(item);
      else this.pendingOutputs.set(item.call_id, item);
      return;
    }
    if (!this.byIndex.get(index)) this.itemAdded(index, item);
    const view = this.byIndex.get(index);
    if (view) view.done(item, fromDeltas);
  }

  // A turn taken over after its server stopped: what it had at its last checkpoint
  // replaces what was shown (a response cut mid-stream is asked for again).
  resumed(output) {
    this.items.replaceChildren();
    this.byIndex = new Map();
    this.byItemId = new Map();
    this.cards = new Map();
    this.pendingOutputs = new Map();
    output.forEach((item, index) => this.itemDone(index, item));
  }

  // A saved turn (from the chat's snapshot): its items, then its end.
  load(message) {
    (message.output || []).forEach((item, index) => this.itemDone(index, item));
    if (!(message.output || []).some((i) => i.type === "message") && message.content) {
      this.itemDone(-1, { type: "message", content: [{ type: "output_text", text: String(message.content) }] });
    }
    for (const source of message.sources || []) this.addSource(source);
    if (message.status === "in_progress") return;
    this.finish({
      status: message.status, usage: message.usage, output: message.output,
      error: message.error ? { content: typeof message.error === "string" ? message.error : (message.error.content || JSON.stringify(message.error)) } : null,
      timings: message.timings,
    }, true);
    if (message.follow_ups && message.follow_ups.length) this.setFollowUps(message.follow_ups);
  }

  approval(data) {
    if (this.finished || this.answered(data.id)) return;
    let card = this.cards.get(data.id);
    if (!card) {
      card = new ToolCard(this, { call_id: data.id, name: data.name, arguments: JSON.stringify(data.arguments || {}) });
      this.cards.set(data.id, card);
      this.items.append(card.node);
    }
    if (card.output) return;
    card.askApproval(data, (ok, reason) => this.ctx.answerApproval(data.id, ok, reason));
  }

  clientTool(data) {
    if (this.finished || this.answered(data.id)) return;
    const card = this.cards.get(data.id);
    if (card && card.output) return;
    this.ctx.runClientTool(data, card);
  }

  answered(callId) {
    const card = this.cards.get(callId);
    return Boolean(card && card.output);
  }

  addEmbed(embed, name) {
    const frame = document.createElement("iframe");
    frame.setAttribute("sandbox", "allow-scripts allow-popups");
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.setAttribute("loading", "lazy");
    frame.title = `Output of ${name}`;
    frame.className = "embed";
    if (typeof embed === "string") frame.srcdoc = embed;
    else {
      const url = safeUrl(embed && embed.url);
      if (!url) return;
      frame.src = url;
    }
    this.embeds.append(frame);
  }

  addSource(data) {
    const source = data.source || {};
    const docs = Array.isArray(data.document) ? data.document : [];
    const metas = Array.isArray(data.metadata) ? data.metadata : [];
    const count = Math.max(1, Math.min(docs.length || 1, 50));
    for (let i = 0; i < count; i++) {
      const meta = metas[i] || {};
      this.sourceCount += 1;
      const li = el("li", "source");
      const url = safeUrl(meta.link || meta.url || source.url || meta.source);
      const title = String(meta.title || meta.name || source.name || meta.source || "source");
      const label = el(url ? "a" : "span", "source-title", title);
      if (url) {
        label.href = url;
        label.target = "_blank";
        label.rel = "noopener noreferrer nofollow";
      }
      li.append(label);
      const snippet = String(docs[i] || "").slice(0, 240);
      if (snippet) li.append(el("span", "source-snippet", snippet));
      this.sources.append(li);
    }
    this.sources.hidden = false;
    schedule(this); // keeps the view pinned to the bottom
  }

  setUsage(usage) {
    if (usage) { this.usage = usage; schedule(this); }
  }

  error(content) {
    const text = String(content || "The turn failed.");
    const box = el("div", "error-box");
    box.dataset.text = text;
    box.setAttribute("role", "alert");
    box.append(el("strong", null, "Error: "), el("span", null, text));
    const hint = errorHint(text);
    if (hint) box.append(el("p", "hint", hint));
    this.errors.append(box);
  }

  finish(data, saved = false) {
    if (this.finished) return;
    this.finished = true;
    this.status = data.status || "completed";
    if (this.status === "cancelled") {
      // Stopped is a normal end, shown by its badge: its "Cancelled." is no error to show
      for (const box of [...this.errors.children]) if (/^cancell?ed\.?$/i.test(box.dataset.text || "")) box.remove();
      data = { ...data, error: null };
    }
    if (data.usage) this.usage = data.usage;
    if (data.timings && typeof data.timings.total_s === "number") this.seconds = data.timings.total_s;
    else if (!saved) this.seconds = (performance.now() - this.started) / 1000;
    if (saved && data.error && data.error.content) this.error(data.error.content);
    if (!saved && data.error && data.error.content && !this.errors.childElementCount) this.error(data.error.content);
    const hasMessage = [...this.byIndex.values()].some((v) => v instanceof MessageItem);
    if (!hasMessage && data.content && !saved) this.itemDone(-1, { type: "message", content: [{ type: "output_text", text: String(data.content) }] });
    for (const view of this.byIndex.values()) {
      if (view instanceof MessageItem && !view.final) { view.final = true; schedule(view); }
      if (view instanceof ToolCard) view.stop(this.status);
    }
    for (const card of this.cards.values()) card.stop(this.status);
    this.node.classList.add(`status-${this.status}`);
    schedule(this);
  }

  setFollowUps(list) {
    this.followUpList = Array.isArray(list) ? list.slice(0, 6) : [];
    schedule(this);
  }

  flush() {
    const actions = this.actions;
    this.actions = [];
    for (const action of actions) action();
    this.meta.replaceChildren();
    if (this.finished) {
      if (this.status === "cancelled") this.meta.append(el("span", "badge stopped", "Stopped"));
      else if (this.status !== "completed") this.meta.append(el("span", "badge failed", this.status));
    }
    const parts = [];
    const u = this.usage;
    if (u) {
      const inTok = u.input_tokens ?? u.prompt_tokens;
      const outTok = u.output_tokens ?? u.completion_tokens;
      if (inTok != null) parts.push(`${inTok} in`);
      if (outTok != null) parts.push(`${outTok} out`);
    }
    const calls = this.cards.size;
    if (calls) parts.push(`${calls} tool call${calls === 1 ? "" : "s"}`);
    if (this.seconds != null) parts.push(`${this.seconds.toFixed(1)} s`);
    if (parts.length) this.meta.append(el("span", "usage", parts.join(" · ")));
    if (this.followUpList) {
      this.followUps.replaceChildren();
      for (const text of this.followUpList) {
        const button = el("button", "follow-up", String(text));
        button.type = "button";
        button.addEventListener("click", () => this.ctx.followUp(String(text)));
        this.followUps.append(button);
      }
    }
  }
}

function errorHint(text) {
  const t = text.toLowerCase();
  if (/connect|unreachable|refused|timed out|timeout|502|503|upstream/.test(t)) {
    return "The model server did not answer: check that it runs (and the route's base_url), then send again.";
  }
  if (/budget/.test(t)) return "The turn reached its token or cost budget: ask for less, or raise the limits' max_*_tokens / max_cost.";
  if (/iteration|cap|limit/.test(t)) {
    return "The turn reached the tool-call limit: ask for a smaller step, or raise limits.max_iterations.";
  }
  if (/401|403|api key|unauthori/.test(t)) return "The model server refused the key: check the route's api_key_env.";
  return "Send the message again, or look at the server's log.";
}

export function userMessage(content) {
  const node = el("article", "msg user");
  node.setAttribute("aria-label", "Your message");
  const body = el("div", "user-text");
  if (typeof content === "string") body.textContent = content;
  else if (Array.isArray(content)) {
    for (const part of content) {
      if (part.type === "text") body.append(el("p", null, part.text || ""));
      else if (part.type === "image_url") {
        const src = imageUrl(part.image_url && part.image_url.url);
        if (src) { const img = el("img", "user-image"); img.alt = "attached image"; img.src = src; body.append(img); }
      }
    }
  }
  node.append(body);
  return node;
}
