// The open chat on screen, live: a new chat or one opened, its event stream followed (and
// looked at again while idle), the events applied to the running turn's view, the
// snapshot and the saved messages with their versions bars, earlier pages, the scroll
// kept at the bottom, and the code blocks' copy buttons. A follow-up suggestion sends
// through send.js, which imports this module: app.js hands its `send` in (`onFollowUp`).

import { api } from "/static/api.js";
import { ChatStream } from "/static/stream.js";
import { TurnView, onFlushed, userMessage } from "/static/render.js";
import { CLIENT_TOOLS, runClientTool } from "/static/client_tools.js";
import { branchBar } from "/static/branches.js";
import { $, banner, guarded, sessionEnded, state } from "/static/page.js";
import { setRunning } from "/static/composer.js";
import { chatList, closeSidebar, showChatHeader, updateChat } from "/static/chats.js";

const IDLE_POLL_MS = 2000; // an idle chat is looked at again this often (turns from other tabs)

let send = null; // send.js's, set by app.js before the page starts

export function onFollowUp(sendMessage) { send = sendMessage; }

export function newChat() {
  closeStream();
  state.snapshotKey = null;
  state.settling = state.recheck = false;
  state.chatId = null;
  state.chat = null;
  state.turn = null;
  state.running = false;
  state.lastId = null;
  history.replaceState(null, "", location.pathname);
  $("messages").replaceChildren();
  showChatHeader();
  chatList.select(null);
  setRunning(false);
  $("input").focus();
}

$("new-chat").addEventListener("click", () => { newChat(); closeSidebar(); });

$("rename-chat").addEventListener("click", () => guarded(async () => {
  const title = prompt("Rename the chat", (state.chat && state.chat.title) || "");
  if (title === null || !title.trim()) return;
  const updated = await api("PATCH", `/api/chats/${state.chatId}`, { title: title.trim() });
  updateChat(updated);
}));

$("delete-chat").addEventListener("click", () => guarded(async () => {
  if (!confirm("Delete this chat and all its messages?")) return;
  const id = state.chatId;
  await api("DELETE", `/api/chats/${id}`);
  chatList.remove(id);
  newChat();
}));

// ------------------------------------------------------------------ one chat, live

export function openChat(chatId) {
  closeStream();
  state.snapshotKey = null;
  state.settling = state.recheck = false;
  state.chatId = chatId;
  state.chat = chatList.find(chatId) || null;
  state.turn = null;
  state.running = false;
  state.lastId = null;
  history.replaceState(null, "", `#chat=${encodeURIComponent(chatId)}`);
  $("messages").replaceChildren();
  showChatHeader();
  chatList.select(chatId);
  banner(null);
  follow();
  if (!state.chat) loadChatRecord(chatId); // not in the pages loaded (an old chat's link)
}

// The title and tags of a chat opened by its address; its messages come from the events.
async function loadChatRecord(chatId) {
  let chat;
  try { chat = await api("GET", `/api/chats/${encodeURIComponent(chatId)}`); } catch (_) { return; } // the stream says why
  if (state.chatId !== chatId) return;
  updateChat({ title: chat.title, tags: chat.tags });
}

export function follow() {
  if (state.stream && !state.stream.closed) return;
  const stream = new ChatStream(state.chatId, {
    lastId: state.lastId,
    onEvent: (event, id) => {
      if (state.stream !== stream) return; // closed mid-chunk: its events belong to another view
      if (id !== null) state.lastId = id;
      onEvent(event);
    },
    onStatus: (status, err) => {
      if (status === "open") banner(null);
      else if (status === "reconnecting") banner("Connection lost: reconnecting…");
      else if (status === "unauthorized") sessionEnded("Your session ended: sign in again.");
      else if (status === "failed") banner(err.status === 404 ? "This chat no longer exists." : err.message);
      if (status === "idle" || status === "failed" || status === "unauthorized") {
        if (state.stream === stream) state.stream = null;
        stream.closed = true;
      }
      if (status === "idle" && state.recheck && state.chatId === stream.chatId) {
        // the stream replayed a turn the snapshot had as saved: a fresh snapshot makes
        // sure it was that turn (not a newer one whose messages were not saved yet)
        state.recheck = false;
        state.lastId = null;
        follow();
      } else if (status === "idle" && state.reread && state.chatId === stream.chatId) {
        state.reread = false; // a branch's turn ended: its answer with its bar
        state.lastId = null;
        state.snapshotKey = null;
        follow();
      } else if (status === "idle") watchIdle(stream.chatId);
    },
  });
  state.stream = stream;
  stream.run(() => state.running);
}

// While nothing runs, look again now and then (resuming after the last event seen): a
// turn started in another tab or client shows up here too.
let idleTimer = 0;
function watchIdle(chatId) {
  clearTimeout(idleTimer);
  idleTimer = setTimeout(() => {
    if (state.chatId !== chatId || state.stream || !state.user) return;
    if (document.visibilityState === "visible") follow();
    else watchIdle(chatId);
  }, IDLE_POLL_MS);
}

export function closeStream() {
  clearTimeout(idleTimer);
  if (state.stream) state.stream.close();
  state.stream = null;
}

const turnContext = {
  outputUrl: (itemId) =>
    `/api/chats/${encodeURIComponent(state.chatId)}/outputs/${encodeURIComponent(itemId)}`,
  fileUrl: (name) =>
    `/api/chats/${encodeURIComponent(state.chatId)}/files/${name.split("/").map(encodeURIComponent).join("/")}`,
  answerApproval: (id, approved, reason) =>
    api("POST", `/api/chats/${state.chatId}/tool-results`, { id, approved, reason }),
  runClientTool: async (data, card) => {
    const chatId = state.chatId;
    const show = (node) => (card ? card.showPanel(node) : state.turn && state.turn.errors.append(node));
    let result;
    try {
      result = await runClientTool(data, show);
    } catch (err) {
      result = `Error: ${err.message}`;
    }
    await guarded(() => api("POST", `/api/chats/${chatId}/tool-results`, { id: data.id, result }));
  },
  followUp: (text) => { $("input").value = text; send(); },
};

function onEvent(event) {
  const data = event.data || {};
  switch (event.type) {
    case "chat:snapshot": return showSnapshot(data);
    case "chat:title": return updateChat({ title: data.title });
    case "chat:tags": return updateChat({ tags: data.tags });
    case "server:shutdown": return banner("The server is restarting: reconnecting…");
    default: break;
  }
  if (!state.turn && isTurnEvent(event.type)) {
    if (state.settling) { // the saved turn's events again: shown already
      if (event.type === "chat:completion" && data.done) { state.settling = false; state.recheck = true; }
      return;
    }
    if (!state.running) { // a turn started elsewhere: the snapshot has its user message
      closeStream();
      state.lastId = null;
      follow();
      return;
    }
    startTurnView();
  }
  if (!state.turn) {
    if (event.type === "chat:message:follow_ups" && state.lastTurn) state.lastTurn.apply(event);
    return;
  }
  state.turn.apply(event);
  if (event.type === "chat:completion" && data.done) {
    state.lastTurn = state.turn;
    state.turn = null;
    setRunning(false);
  }
}

// A turn paused for an answer (saved on the server, run by nobody): its questions again.
function askAgain(view, waiting) {
  for (const ask of waiting) {
    if (ask.kind === "approval") view.approval({ id: ask.id, name: ask.name, arguments: ask.arguments });
    else view.clientTool({ id: ask.id, name: ask.name, params: ask.arguments });
  }
}

function isTurnEvent(type) {
  return type.startsWith("response.") || type === "chat:completion" || type === "chat:message:error" ||
    type === "source" || type.startsWith("tool:") || type === "execute:tool" || type === "chat:turn:resumed";
}

export function startTurnView() {
  state.turn = new TurnView(turnContext);
  $("messages").append(state.turn.node);
  setRunning(true);
}

function showSnapshot(data) {
  const key = (data.messages || []).map((m) => `${m.id}:${m.status}`).join();
  if (!data.running && !state.running && key === state.snapshotKey) return; // nothing new
  state.snapshotKey = key;
  const box = $("messages");
  box.replaceChildren();
  state.turn = null;
  const messages = data.messages || [];
  const last = messages[messages.length - 1];
  // Live: the running turn's answer is still being written, or not saved yet (its user
  // message is the last one). Running with a finished answer last is a turn saved a
  // moment before its worker let go of the chat (or one whose message is not saved
  // yet): shown as saved; its replayed events are skipped (`settling`), what follows
  // them (title, tags, follow-ups) is applied, and a fresh snapshot checks it at the end.
  const writing = Boolean(data.running && last && last.role === "assistant" && last.status === "in_progress");
  const unanswered = Boolean(data.running && last && last.role === "user");
  if (data.more && messages.length) box.append(earlierLink(state.chatId, messages[0].id));
  messages.forEach((m) => {
    if (m.role === "assistant" && writing && m === last) startTurnView(); // its events follow from the start
    else {
      const node = savedMessage(m, true, m === last && !data.running);
      if (node) box.append(node);
    }
  });
  if (unanswered) startTurnView();
  if (!data.running && last && last.status === "in_progress" && state.lastTurn) {
    askAgain(state.lastTurn, data.waiting || []); // paused: saved, waiting for this answer
  }
  state.settling = Boolean(data.running) && !writing && !unanswered;
  setRunning(writing || unanswered);
  stickToBottom(true);
}

// A saved message's node (a user message, or a finished turn); a `latest` turn becomes
// the one follow-ups attach to (earlier pages never do).
// Its versions bar (`branches.js`) follows it, beside it rather than inside: the
// message's own text stays what it is.
function savedMessage(m, latest, isLast = false) {
  if (m.role === "user") return withBar(userMessage(m.content), m, isLast);
  if (m.role !== "assistant") return null;
  const view = new TurnView(turnContext);
  view.load(m);
  if (latest) state.lastTurn = view;
  return m.status === "in_progress" ? view.node : withBar(view.node, m, isLast);
}

function withBar(node, m, isLast) {
  const both = document.createDocumentFragment();
  both.append(node, branchBar(m, isLast, branchActions));
  return both;
}

// Switching versions and starting a turn from a branch: the chat is read again (a fresh
// snapshot shows the branch, and a running turn's events follow); once a started turn
// ends, once more, so its answer gets its bar.
const branchActions = {
  switchTo: (messageId) => branchCall(`branch`, { message_id: messageId }, false),
  regenerate: (messageId) => branchCall(`regenerate`, branchTurn({ message_id: messageId }), true),
  continueAnswer: (messageId) => branchCall(`continue`, branchTurn({ message_id: messageId }), true),
  edit: (messageId, content) =>
    branchCall(`messages/${encodeURIComponent(messageId)}/edit`, branchTurn({ content }), true),
};

function branchTurn(body) {
  const model = $("model").value;
  return { ...body, ...(model ? { model } : {}), tools: CLIENT_TOOLS };
}

function branchCall(path, body, turn) {
  const chatId = state.chatId;
  if (!chatId || state.running) return;
  guarded(async () => {
    await api("POST", `/api/chats/${encodeURIComponent(chatId)}/${path}`, body);
    if (state.chatId !== chatId) return;
    state.reread = turn;
    closeStream();
    state.lastId = null;
    state.snapshotKey = null;
    follow();
  });
}

// A long chat's snapshot holds its last messages: this link reads the page before
// `beforeId` (GET /api/chats/{id}?before=…&limit=…) and puts it above.
const EARLIER_PAGE = 100;
function earlierLink(chatId, beforeId) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "link earlier";
  button.textContent = "Earlier messages…";
  button.addEventListener("click", () => guarded(async () => {
    button.disabled = true;
    const query = `limit=${EARLIER_PAGE}&before=${encodeURIComponent(beforeId)}`;
    const page = await api("GET", `/api/chats/${encodeURIComponent(chatId)}?${query}`);
    if (state.chatId !== chatId || !button.isConnected) return;
    const box = $("messages");
    const height = box.scrollHeight;
    const nodes = (page.messages || []).map((m) => savedMessage(m, false)).filter(Boolean);
    if (page.more && page.messages.length) nodes.unshift(earlierLink(chatId, page.messages[0].id));
    button.replaceWith(...nodes);
    box.scrollTop += box.scrollHeight - height; // keep what was in view where it was
  }));
  return button;
}

let pinned = true;
$("messages").addEventListener("scroll", () => {
  const box = $("messages");
  pinned = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
});

onFlushed(() => stickToBottom()); // once per frame, after the frame's DOM changes

export function stickToBottom(force = false) {
  const box = $("messages");
  if (force || pinned) box.scrollTop = box.scrollHeight;
}

// Code blocks' copy buttons (one listener for all).
$("messages").addEventListener("click", async (e) => {
  const button = e.target.closest("button.copy");
  if (!button) return;
  const code = button.parentElement.querySelector("code");
  try {
    await navigator.clipboard.writeText(code ? code.textContent : "");
    button.textContent = "Copied";
  } catch (_) {
    button.textContent = "Copy failed";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
});
