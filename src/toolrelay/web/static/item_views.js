// The views of a turn's output items (render.js's TurnView makes them from events): an
// answer (Markdown), reasoning, and a tool call's card (its arguments, progress, result,
// images, embeds and approval). Each keeps its state and `schedule`s itself; the DOM is
// touched in `flush`. Model and tool strings reach the DOM as text or through DOMPurify.

import { el, imageUrl } from "/static/dom.js";
import { schedule } from "/static/flush.js";
import { MarkdownView } from "/static/markdown.js";

const RESULT_PREVIEW = 4000;

function outputText(output) {
  if (typeof output === "string") return output;
  if (Array.isArray(output)) {
    return output.map((p) => (p && (p.text ?? (p.type === "input_image" ? "[image]" : ""))) || "").join("\n");
  }
  return output == null ? "" : JSON.stringify(output, null, 2);
}

function prettyArgs(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch (_) { return text; }
}

// ------------------------------------------------------------------ items

export class MessageItem {
  constructor(turn) {
    this.node = el("div", "answer markdown");
    this.node.setAttribute("aria-live", "polite");
    this.node.setAttribute("aria-busy", "true");
    this.md = new MarkdownView(this.node);
    this.final = false;
    this.turn = turn;
  }
  delta(text) { this.md.append(text); schedule(this); }
  setText(text) { this.md.set(text); schedule(this); }
  done(item, fromDeltas) {
    const text = fromDeltas ? "" : (item.content || []).map((c) => c.text || c.refusal || "").join("");
    if (text && text !== this.md.text) this.md.set(text);
    this.final = true;
    schedule(this);
  }
  flush(deadline) {
    if (!this.md.render(deadline)) { schedule(this); return; } // the rest next frame
    if (this.final) this.node.setAttribute("aria-busy", "false");
  }
}

export class ReasoningItem {
  constructor(turn) {
    this.node = el("details", "reasoning");
    this.summary = el("summary", null, "Thinking…");
    this.body = el("div", "reasoning-text");
    this.node.append(this.summary, this.body);
    this.text = "";
    this.started = performance.now();
    this.label = null;
    this.turn = turn;
  }
  delta(text) { this.text += text; schedule(this); }
  done(item, fromDeltas) {
    const text = fromDeltas ? "" : (item.content || []).map((c) => c.text || "").join("") ||
      (item.summary || []).map((c) => c.text || "").join("");
    if (text) this.text = text;
    const secs = typeof item.duration === "number" ? item.duration : (performance.now() - this.started) / 1000;
    this.label = `Thought for ${secs < 1 ? "<1" : Math.round(secs)} s`;
    schedule(this);
  }
  flush() {
    if (this.body.textContent.length !== this.text.length) this.body.textContent = this.text;
    if (this.label) this.summary.textContent = this.label;
  }
}

export class ToolCard {
  constructor(turn, item) {
    this.turn = turn;
    this.callId = item.call_id;
    this.name = item.name || "tool";
    this.node = el("details", "tool running");
    this.summary = el("summary");
    this.spinner = el("span", "spinner");
    this.spinner.setAttribute("aria-hidden", "true");
    this.title = el("span", "tool-name", this.name);
    this.state = el("span", "tool-state", "running");
    this.summary.append(this.spinner, this.title, this.state);
    this.args = el("pre", "tool-args");
    this.progress = el("div", "tool-progress");
    this.progress.hidden = true;
    this.panel = el("div", "tool-panel");
    this.result = el("div", "tool-result");
    this.node.append(this.summary, this.args, this.progress, this.panel, this.result);
    this.argText = item.arguments || "";
    this.argsFinal = false;
    this.dirty = new Set(["args"]);
  }
  delta(text) { this.argText += text; this.mark("args"); }
  argsDone(text) { if (typeof text === "string") this.argText = text; this.argsFinal = true; this.mark("args"); }
  done(item, fromDeltas) { this.argsDone(fromDeltas ? undefined : item.arguments); }
  mark(part) { this.dirty.add(part); schedule(this); }
  setProgress(data) {
    const total = typeof data.total === "number" ? ` / ${data.total}` : "";
    const msg = data.message ? ` ${data.message}` : "";
    this.progressText = `${data.progress ?? ""}${total}${msg}`.trim();
    this.mark("progress");
  }
  // A tool's own `status` event: its description, until the next one.
  setStatus(data) {
    if (data.hidden || !data.description) return;
    this.progressText = String(data.description);
    this.mark("progress");
  }
  setOutput(item) {
    this.output = item;
    const shown = (item.statuses || []).filter((s) => s && !s.hidden && s.description);
    if (shown.length) this.setStatus(shown[shown.length - 1]);
    this.mark("result");
  }
  flush() {
    if (this.dirty.has("args")) this.args.textContent = this.argsFinal ? prettyArgs(this.argText) : this.argText;
    if (this.dirty.has("progress")) {
      this.progress.hidden = false;
      this.progress.textContent = this.progressText;
    }
    if (this.dirty.has("result") && this.output) this.renderResult(this.output);
    this.dirty.clear();
  }
  renderResult(item) {
    const failed = item.status === "failed" || item.status === "incomplete";
    this.node.classList.remove("running");
    this.node.classList.toggle("failed", failed);
    this.state.textContent = failed ? "error" : "done";
    this.panel.replaceChildren();
    const text = outputText(item.output);
    const pre = el("pre", failed ? "tool-output error" : "tool-output");
    if (text.length > RESULT_PREVIEW) {
      pre.textContent = text.slice(0, RESULT_PREVIEW) + "…";
      const more = el("button", "link", `Show all (${text.length.toLocaleString()} characters)`);
      more.type = "button";
      more.addEventListener("click", () => { pre.textContent = text; more.remove(); });
      this.result.replaceChildren(pre, more);
    } else {
      pre.textContent = text || "(no output)";
      this.result.replaceChildren(pre);
    }
    const cut = item.cut && typeof item.cut === "object" ? item.cut : null;
    if (cut && item.id && this.turn.ctx.outputUrl) {
      // the model read this result cut; the whole text is kept for the user
      const whole = el("a", "whole-result", `Show the whole result (${Number(cut.bytes).toLocaleString()} bytes; the model read ${Number(cut.sent).toLocaleString()})`);
      whole.href = this.turn.ctx.outputUrl(String(item.id));
      whole.target = "_blank";
      whole.rel = "noopener";
      this.result.append(whole);
    }
    if (failed) this.node.open = true;
    for (const file of item.files || []) {
      const src = this.fileSource(file);
      if (src && (file.type === "image" || /^image\//.test(file.mime_type || "") || /^data:image\//.test(src))) {
        const img = el("img", "tool-image");
        img.alt = "image from " + this.name;
        img.src = src;
        this.result.append(img);
      }
    }
    for (const embed of item.embeds || []) this.turn.addEmbed(embed, this.name);
  }
  // Where a result's image is shown from. Live events carry images with their data cut
  // out (the server strips base64); a code cell's files are saved in the chat, so those
  // are shown from the chat's files endpoint instead of as a broken data URI.
  fileSource(file) {
    if (!file) return null;
    const url = String(file.url || "");
    if (/^data:image\/(png|jpe?g|gif|webp);base64,[A-Za-z0-9+/=]+$/i.test(url)) return url;
    if (this.name === "execute_code" && file.name && this.turn.ctx.fileUrl) {
      return this.turn.ctx.fileUrl(String(file.name));
    }
    return /^data:/i.test(url) ? null : imageUrl(url);
  }
  // An approval request: Approve / Reject (with a reason) until answered.
  askApproval(data, answer) {
    this.node.open = true;
    this.state.textContent = "waiting for approval";
    const box = el("div", "approval");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", `Approve the call to ${this.name}`);
    const text = el("p", null, `Run ${this.name}?`);
    const reason = el("input");
    reason.type = "text";
    reason.placeholder = "Reason (optional)";
    reason.setAttribute("aria-label", "Reason");
    const yes = el("button", "primary approve", "Approve");
    const no = el("button", "danger reject", "Reject");
    yes.type = no.type = "button";
    const send = async (ok) => {
      yes.disabled = no.disabled = true;
      try {
        await answer(ok, reason.value.trim() || null);
        box.replaceChildren(el("p", "muted", ok ? "Approved." : "Rejected."));
        this.state.textContent = ok ? "running" : "rejected";
      } catch (err) {
        yes.disabled = no.disabled = false;
        box.append(el("p", "error", err.message));
      }
    };
    yes.addEventListener("click", () => send(true));
    no.addEventListener("click", () => send(false));
    box.append(text, reason, yes, no);
    this.panel.replaceChildren(box);
    yes.focus({ preventScroll: true });
  }
  showPanel(node) { this.node.open = true; this.panel.replaceChildren(node); }
  stop(status) {
    if (this.output || !this.node.classList.contains("running")) return;
    this.node.classList.remove("running");
    this.state.textContent = status === "cancelled" ? "stopped" : "not finished";
    this.panel.replaceChildren();
  }
}
