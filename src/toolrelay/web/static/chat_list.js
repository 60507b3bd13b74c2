// The sidebar's chat list: the user's chats a page at a time, newest first, as the
// server orders them (`GET /api/chats`, most recently updated first), searched on the
// server (`?q=`: a title or a message contains it) so a search covers every chat, not
// only the pages loaded so far.
//
// The next page loads when the end of the list scrolls into view (or on "Older chats…").
// A search or a reset starts a new generation: answers to older requests are dropped,
// so a slow page never lands in the list of a newer search.

import { api } from "/static/api.js";

export const PAGE = 30;
const SEARCH_DELAY_MS = 200; // typing: one request per pause, not per key
const NEAR_END_PX = 200;     // the next page loads this close to the end of the list

export class ChatList {
  // nodes: { list, more, search, scroller }; onOpen(chatId) when a chat is picked;
  // onError(err) when a page fails to load.
  constructor(nodes, { onOpen, onError }) {
    this.nodes = nodes;
    this.onOpen = onOpen;
    this.onError = onError;
    this.chats = [];
    this.total = 0;
    this.cursor = undefined; // the last page's next_cursor; null: no page after it
    this.currentId = null;
    this.generation = 0;
    this.loading = null;   // the page request in flight
    this.touched = new Map(); // chats sent to since the first page was asked for: kept on top
    this.removed = new Set(); // chats deleted here: a page asked for before still holds them
    this.searchTimer = 0;
    nodes.more.addEventListener("click", () => this.more());
    nodes.search.addEventListener("input", () => {
      clearTimeout(this.searchTimer);
      this.searchTimer = setTimeout(() => this.reset().catch(onError), SEARCH_DELAY_MS);
    });
    new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) this.more();
    }, { root: nodes.scroller, rootMargin: `0px 0px ${NEAR_END_PX}px 0px` }).observe(nodes.more);
  }

  get query() { return this.nodes.search.value.trim(); }

  // once a page came, the last one is the one without a next_cursor (a search's total
  // may be a lower bound, `total_capped`); before the first, nothing is owed
  get complete() {
    return this.cursor === undefined ? this.chats.length >= this.total : this.cursor === null;
  }

  // The first page again (after sign-in, or for a new search).
  async reset() {
    clearTimeout(this.searchTimer);
    this.generation += 1;
    this.loading = null;
    this.touched = new Map();
    await this.load(true);
  }

  // The next page, unless one is loading or all are here.
  async more() {
    if (this.loading || this.complete) return;
    try { await this.load(false); } catch (err) { this.onError(err); }
  }

  async load(reset) {
    const generation = this.generation;
    // the next page starts after the last chat of the one before (its `next_cursor`):
    // it costs what the first does, and a chat that moves up is not met again
    const params = new URLSearchParams({ source: "chat", limit: String(PAGE) });
    if (!reset && this.cursor) params.set("cursor", this.cursor);
    if (this.query) params.set("q", this.query);
    const request = api("GET", `/api/chats?${params}`);
    this.loading = request;
    let page;
    try {
      page = await request;
    } finally {
      if (this.loading === request) this.loading = null;
    }
    if (generation !== this.generation) return; // a newer search or reset answered for it
    this.cursor = page.next_cursor || null;
    const seen = new Set(reset ? [] : this.chats.map((c) => c.id));
    // a chat the user sent to went to the top already: never listed twice
    let fresh = page.data.filter((c) => !seen.has(c.id) && !this.removed.has(c.id));
    if (reset) { // a chat sent to while the page was on its way stays first
      const ids = new Set(fresh.map((c) => c.id));
      fresh = [...[...this.touched.values()].filter((c) => !ids.has(c.id)), ...fresh];
    }
    this.chats = reset ? fresh : this.chats.concat(fresh);
    this.total = Math.max(page.total, this.chats.length);
    if (this.cursor === null) this.total = this.chats.length; // the last page: done
    this.render();
    // the list does not reach the end of the sidebar yet: the observer will not fire again
    if (this.endVisible()) queueMicrotask(() => this.more());
  }

  endVisible() {
    const { more, scroller } = this.nodes;
    if (more.hidden) return false;
    const box = scroller.getBoundingClientRect();
    return box.height > 0 && more.getBoundingClientRect().top < box.bottom + NEAR_END_PX;
  }

  find(id) { return this.chats.find((c) => c.id === id); }

  // A chat the user is working in: first in the list (it is the most recently updated).
  toTop(chat) {
    const known = this.find(chat.id);
    if (!known) this.total += 1;
    const merged = Object.assign(known || {}, chat);
    this.touched.set(chat.id, merged);
    this.chats = [merged, ...this.chats.filter((c) => c.id !== chat.id)];
    this.render();
  }

  update(id, fields) {
    const chat = this.find(id);
    if (chat) Object.assign(chat, fields);
    this.render();
  }

  remove(id) {
    this.removed.add(id);
    this.touched.delete(id);
    const before = this.chats.length;
    this.chats = this.chats.filter((c) => c.id !== id);
    this.total -= before - this.chats.length;
    this.render();
  }

  select(id) {
    this.currentId = id;
    this.render();
  }

  render() {
    const items = this.chats.map((chat) => {
      const li = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "chat-link";
      button.dataset.chatId = chat.id;
      if (chat.id === this.currentId) button.setAttribute("aria-current", "page");
      const name = document.createElement("span");
      name.className = "chat-name";
      name.textContent = chat.title || "New chat";
      button.append(name);
      if (chat.tags && chat.tags.length) {
        const tags = document.createElement("span");
        tags.className = "chat-tags";
        tags.textContent = chat.tags.join(" · ");
        button.append(tags);
      }
      button.addEventListener("click", () => this.onOpen(chat.id));
      li.append(button);
      return li;
    });
    this.nodes.list.replaceChildren(...items);
    this.nodes.more.hidden = this.complete;
    const empty = this.nodes.empty;
    if (empty) {
      empty.hidden = items.length > 0 || !this.query;
      empty.textContent = this.query ? `No chat contains “${this.query}”.` : "";
    }
  }
}
