// Sending from the composer: a message (in a new chat first) with its images, the user's
// message and the turn's view on screen, the turn posted and its events followed; Stop
// (or Esc) cancels the running turn. Enter sends, Shift+Enter is a new line.

import { api, ApiError } from "/static/api.js";
import { userMessage } from "/static/render.js";
import { CLIENT_TOOLS } from "/static/client_tools.js";
import { $, guarded, state } from "/static/page.js";
import { clearAttachments, composeNote, setRunning } from "/static/composer.js";
import { chatList, showChatHeader } from "/static/chats.js";
import { follow, startTurnView, stickToBottom } from "/static/chat_view.js";

export async function send() {
  const input = $("input");
  const text = input.value.trim();
  if ((!text && !state.attachments.length) || state.running || state.sending) return;
  const content = state.attachments.length
    ? [{ type: "text", text }, ...state.attachments.map((url) => ({ type: "image_url", image_url: { url } }))]
    : text;
  const model = $("model").value;
  if (!model || $("input").disabled) {
    composeNote($("model").options.length
      ? "Pick a model first: the message is kept."
      : "No model to send to yet: the models are still loading, or none is configured. The message is kept.");
    return;
  }
  composeNote(null);
  state.sending = true; // until the turn view is up: a second Enter meanwhile sends nothing
  try {
    await guarded(() => post(content, model));
  } finally {
    state.sending = false;
  }
}

// The chat (a new one first), the user's message on screen, the turn posted, its events followed.
async function post(content, model) {
  const input = $("input");
  if (!state.chatId) {
    const chat = await api("POST", "/api/chats", { model });
    state.chatId = chat.id;
    state.chat = chat;
    history.replaceState(null, "", `#chat=${encodeURIComponent(chat.id)}`);
    showChatHeader();
    chatList.select(chat.id);
  }
  chatList.toTop(state.chat || { id: state.chatId }); // now the most recently updated
  state.chat = chatList.find(state.chatId);
  input.value = "";
  clearAttachments();
  $("messages").append(userMessage(content));
  startTurnView(); // before the post: the turn's first events may come before its answer
  stickToBottom(true);
  try {
    await api("POST", `/api/chats/${state.chatId}/messages`, { content, model, tools: CLIENT_TOOLS });
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) throw err;
    state.turn.error(err.message); // in place, where the answer would have been
    state.turn.finish({ status: "failed" }, true);
    state.turn = null;
    setRunning(false);
    return;
  }
  follow();
}

async function stop() {
  if (!state.chatId) return;
  await guarded(() => api("POST", `/api/chats/${state.chatId}/cancel`));
}

$("compose").addEventListener("submit", (e) => { e.preventDefault(); send(); });
$("stop").addEventListener("click", stop);
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && state.running) { e.preventDefault(); stop(); }
});
