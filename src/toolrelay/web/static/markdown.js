// Markdown → sanitised DOM, block by block, so a long answer streams in bounded work.
//
// The text is cut into blocks at blank lines outside code fences (a blank line inside a
// list or before an indented line does not cut). Every block but the last is finished:
// it is rendered once and kept; only the last block is rendered again as text arrives.
// The cut depends only on the text, so a streamed answer and the same answer loaded
// from the saved chat give the same DOM. Everything goes through DOMPurify; links open
// in a new tab without an opener; code blocks get a copy button and light highlighting.

import { marked } from "/static/vendor-marked.js";
import DOMPurify from "/static/vendor-purify.js";

marked.setOptions({ gfm: true, breaks: false });

const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "iframe", "frame", "object", "embed", "form", "input", "button", "textarea", "select", "svg", "math", "base", "link", "meta"],
  FORBID_ATTR: ["style", "srcset", "action", "formaction"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#|\/(?!\/)|data:image\/(?:png|jpe?g|gif|webp);)/i,
};

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
  if (node.tagName === "IMG") {
    node.setAttribute("loading", "lazy");
    node.setAttribute("referrerpolicy", "no-referrer");
  }
});

export function sanitize(html) {
  return DOMPurify.sanitize(html, { ...PURIFY, RETURN_DOM_FRAGMENT: true });
}

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const LIST_ITEM = /^ {0,3}(?:[-*+]|\d{1,9}[.)])\s/;

// Offsets where finished blocks end (each cut is just after a blank line).
export function blockCuts(text, from = 0, fenceState = null) {
  const cuts = [];
  let fence = fenceState;
  let pos = from;
  let prevLine = "";
  let lastBlockIsList = false;
  while (pos < text.length) {
    const nl = text.indexOf("\n", pos);
    if (nl < 0) break;
    const line = text.slice(pos, nl);
    const next = nl + 1;
    const m = FENCE.exec(line);
    if (fence) {
      if (m && m[1][0] === fence[0] && m[1].length >= fence.length && line.trim() === m[1]) fence = null;
    } else if (m) {
      fence = m[1];
    } else if (line.trim() === "" && prevLine.trim() !== "") {
      // a blank line ends a block unless what follows continues it
      const end = text.indexOf("\n", next);
      if (end < 0) break; // the next line is not complete yet
      const following = text.slice(next, end);
      const continues = /^\s/.test(following) || following.trim() === "" ||
        (lastBlockIsList && LIST_ITEM.test(following));
      if (!continues) cuts.push(next);
    }
    if (!fence && line.trim() !== "") lastBlockIsList = LIST_ITEM.test(line) || (lastBlockIsList && /^\s/.test(line));
    prevLine = line;
    pos = next;
  }
  return cuts;
}

function renderBlock(source) {
  const fragment = sanitize(marked.parse(source));
  decorate(fragment);
  return fragment;
}

// Code blocks: a copy button and keyword highlighting (text nodes only: no HTML made here).
function decorate(root) {
  for (const pre of root.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    if (!code) continue;
    highlight(code);
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy";
    button.textContent = "Copy";
    button.setAttribute("aria-label", "Copy the code");
    pre.classList.add("code");
    pre.append(button);
  }
}

const TOKEN = /(\/\/[^\n]*|#[^\n]*|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|\b(?:def|class|return|if|elif|else|for|while|in|import|from|as|with|try|except|finally|raise|async|await|function|const|let|var|new|true|false|null|None|True|False|yield|lambda|pass|break|continue|export|default|fn|pub|struct|impl|match)\b|\b\d+(?:\.\d+)?\b)/g;

function highlight(code) {
  const text = code.textContent;
  if (text.length > 20000) return;
  const out = document.createDocumentFragment();
  let last = 0;
  for (const m of text.matchAll(TOKEN)) {
    if (m.index > last) out.append(text.slice(last, m.index));
    const span = document.createElement("span");
    const t = m[0];
    span.className = t.startsWith("//") || t.startsWith("#") ? "tk-c" : /^["']/.test(t) ? "tk-s" : /^\d/.test(t) ? "tk-n" : "tk-k";
    span.textContent = t;
    out.append(span);
    last = m.index + t.length;
  }
  if (last < text.length) out.append(text.slice(last));
  code.replaceChildren(out);
}

// One message's Markdown, rendered incrementally into `root`.
export class MarkdownView {
  constructor(root) {
    this.root = root;
    this.text = "";
    this.done = 0;          // offset of the end of the finished blocks
    this.tail = null;       // the element holding the unfinished last block
    this.rendered = -1;     // text length the tail was last rendered at
  }

  set(text) { this.text = text; }

  append(delta) { this.text += delta; }

  // Render what changed since the last call; `final` renders the last block as finished.
  render(final = false) {
    if (this.rendered === this.text.length && !final) return;
    const cuts = blockCuts(this.text, this.done);
    for (const cut of cuts) {
      this.finishBlock(this.text.slice(this.done, cut));
      this.done = cut;
    }
    const rest = this.text.slice(this.done);
    if (!this.tail) {
      this.tail = document.createElement("div");
      this.tail.className = "md-block";
      this.root.append(this.tail);
    }
    this.tail.replaceChildren(rest.trim() ? renderBlock(rest) : "");
    this.rendered = this.text.length;
  }

  finishBlock(source) {
    const block = document.createElement("div");
    block.className = "md-block";
    block.append(renderBlock(source));
    if (this.tail) this.root.insertBefore(block, this.tail);
    else this.root.append(block);
  }

  // Whether rendering the rest would be one big task: callers then render in slices.
  pendingBlocks() { return blockCuts(this.text, this.done).length; }

  // Render at most `max` finished blocks (for a long saved answer shown over several tasks).
  renderSome(max) {
    const cuts = blockCuts(this.text, this.done).slice(0, max);
    for (const cut of cuts) {
      this.finishBlock(this.text.slice(this.done, cut));
      this.done = cut;
    }
    return cuts.length;
  }
}
