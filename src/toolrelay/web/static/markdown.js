// Markdown → sanitised DOM, block by block, so a long answer streams in bounded work.
//
// The text is cut into blocks at blank lines outside code fences (a blank line inside a
// list or before an indented line does not cut). Every block but the last is finished:
// it is rendered once and kept; only the last block is rendered again as text arrives.
// The cut depends only on the text, so a streamed answer and the same answer loaded
// from the saved chat give the same DOM. Everything goes through DOMPurify; links open
// in a new tab without an opener; code blocks get a copy button and light highlighting.
// An image from another host than this one and the deployment's `image_hosts` is never
// loaded (its URL could carry the chat away: a prompt injection's way out): it is shown
// as a link that opens it in a new tab, only when clicked.

import { marked } from "/static/vendor-marked.js";
import DOMPurify from "/static/vendor-purify.js";

marked.setOptions({ gfm: true, breaks: true }); // a single newline is a line break, as chat UIs show it

let imageHosts = []; // [scheme, host pattern, port] from /api/info's image_hosts

// The hosts (`https://host[:port]`, `https://*.example.org`) images may load from.
export function setImageHosts(hosts) {
  imageHosts = (hosts || []).map((h) => /^(https):\/\/([^/:]+)(?::(\d+))?$/.exec(h)).filter(Boolean)
    .map((m) => [m[1] + ":", m[2].toLowerCase(), m[3] && m[3] !== "443" ? m[3] : ""]);
}

function imageAllowed(src) {
  if (/^data:image\//i.test(src)) return true;
  let url;
  try { url = new URL(src, location.href); } catch (_) { return false; }
  if (url.origin === location.origin) return true;
  return imageHosts.some(([scheme, host, port]) => url.protocol === scheme && url.port === port &&
    (host.startsWith("*.") ? url.hostname.endsWith(host.slice(1)) : url.hostname === host));
}

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
    const src = node.getAttribute("src");
    if (src && !imageAllowed(src)) { // still in the inert template: nothing was fetched
      node.removeAttribute("src");
      node.setAttribute("data-blocked-src", src);
    }
  }
});

// Sanitised in place in an inert <template> (its document runs no script and loads
// nothing), then moved into the page: no new document per call, which under load was
// most of a block's cost. The config is parsed once, not per call.
DOMPurify.setConfig({ ...PURIFY, IN_PLACE: true });
const inert = document.createElement("template");

export function sanitize(html) {
  inert.innerHTML = html;
  const root = inert.content.ownerDocument.createElement("div");
  root.append(...inert.content.childNodes);
  DOMPurify.sanitize(root);
  const fragment = document.createDocumentFragment();
  fragment.append(...root.childNodes);
  return fragment;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const LIST_ITEM = /^ {0,3}(?:[-*+]|\d{1,9}[.)])\s/;

// Where finished blocks end (each cut is just after a blank line), found incrementally:
// the text only grows while it streams, so each line is looked at once.
export class BlockSplitter {
  constructor() {
    this.pos = 0;          // start of the first line not yet scanned
    this.fence = null;     // the open code fence, if any
    this.prevBlank = true; // the line before `pos` was blank (or there is none)
    this.inList = false;   // the current block is a list
  }

  // New cut offsets in `text` (which must extend the text of the previous calls).
  feed(text) {
    const cuts = [];
    while (this.pos < text.length) {
      const nl = text.indexOf("\n", this.pos);
      if (nl < 0) break;
      const line = text.slice(this.pos, nl);
      const next = nl + 1;
      const blank = line.trim() === "";
      if (this.fence) {
        const m = FENCE.exec(line);
        if (m && m[1][0] === this.fence[0] && m[1].length >= this.fence.length && line.trim() === m[1]) this.fence = null;
      } else if (FENCE.test(line)) {
        this.fence = FENCE.exec(line)[1];
      } else if (blank && !this.prevBlank) {
        // a blank line ends a block unless what follows continues it
        const end = text.indexOf("\n", next);
        if (end < 0) break; // the next line is not complete yet: look again later
        const following = text.slice(next, end);
        const continues = /^\s/.test(following) || following.trim() === "" ||
          (this.inList && LIST_ITEM.test(following));
        if (!continues) cuts.push(next);
      }
      if (!this.fence && !blank) this.inList = LIST_ITEM.test(line) || (this.inList && /^\s/.test(line));
      this.prevBlank = blank && !this.fence;
      this.pos = next;
    }
    return cuts;
  }
}

export function blockCuts(text) { return new BlockSplitter().feed(text); }

function renderBlock(source) {
  const fragment = sanitize(marked.parse(source));
  decorate(fragment);
  return fragment;
}

// Code blocks: a copy button and keyword highlighting (text nodes only: no HTML made here);
// an image from a host not allowed: a link to it.
function decorate(root) {
  for (const img of root.querySelectorAll("img[data-blocked-src]")) {
    const src = img.getAttribute("data-blocked-src");
    const link = document.createElement("a");
    link.className = "image-link";
    link.href = src;
    link.target = "_blank";
    link.rel = "noopener noreferrer nofollow";
    let host = src;
    try { host = new URL(src, location.href).host; } catch (_) { /* shown whole */ }
    const alt = img.getAttribute("alt");
    link.textContent = `Image${alt ? ` "${alt}"` : ""} from ${host}`;
    link.title = `Not loaded: images from ${host} are off on this server. Click to open it.`;
    img.replaceWith(link);
  }
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
    this.tailStale = false;
    this.splitter = new BlockSplitter();
    this.cuts = [];         // found but not yet rendered
  }

  set(text) {
    if (!text.startsWith(this.text)) { // not a continuation: start over
      this.root.replaceChildren();
      this.done = 0;
      this.tail = null;
      this.splitter = new BlockSplitter();
      this.cuts = [];
    }
    this.text = text;
  }

  append(delta) { this.text += delta; }

  // Render what changed, within the frame's budget: finished blocks first (each once),
  // then the unfinished last block. Returns false when time ran out (call again next frame).
  render(deadline = Infinity) {
    if (this.rendered === this.text.length && !this.tailStale) return true;
    this.cuts.push(...this.splitter.feed(this.text));
    while (this.cuts.length) {
      if (performance.now() > deadline) return false;
      const cut = this.cuts.shift();
      this.finishBlock(this.text.slice(this.done, cut));
      this.done = cut;
      this.tailStale = true;
    }
    if (performance.now() > deadline) return false;
    const rest = this.text.slice(this.done);
    if (!this.tail) {
      this.tail = document.createElement("div");
      this.tail.className = "md-block";
      this.root.append(this.tail);
    }
    this.tail.replaceChildren(rest.trim() ? renderBlock(rest) : "");
    this.rendered = this.text.length;
    this.tailStale = false;
    return true;
  }

  finishBlock(source) {
    const block = document.createElement("div");
    block.className = "md-block done";
    block.append(renderBlock(source));
    if (this.tail) this.root.insertBefore(block, this.tail);
    else this.root.append(block);
  }
}

// Warm marked and DOMPurify up while the page is idle, so the first streamed answer's
// first frame does not pay for compiling them.
const WARM_UP = "# t\n\n**b** _i_ `c` [l](https://example.org)\n\n- a\n- b\n\n1. c\n\n```js\nlet x = 1;\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n> q\n";
(globalThis.requestIdleCallback || setTimeout)(() => { for (let i = 0; i < 3; i++) renderBlock(WARM_UP); });
