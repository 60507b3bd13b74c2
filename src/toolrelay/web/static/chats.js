// The user's chats around the open one: the sidebar's one ChatList (chat_list.js), the
// open chat's header (title, tags, Rename and Delete), the open chat's record kept in
// step with its entry in the list (updateChat), and the sidebar sliding over at phone
// width. A chat picked in the list opens in chat_view.js, which imports this module:
// app.js hands that in with `onChatPicked`.

import { ChatList } from "/static/chat_list.js";
import { $, guarded, state } from "/static/page.js";

let openChat = null; // chat_view.js's, set by app.js before the page starts

export function onChatPicked(open) { openChat = open; }

export const chatList = new ChatList(
  { list: $("chat-list"), more: $("more-chats"), search: $("search"), scroller: $("chat-scroller"), empty: $("chat-list-empty") },
  { onOpen: (id) => { openChat(id); closeSidebar(); }, onError: (err) => guarded(() => { throw err; }) },
);

export function showChatHeader() {
  const chat = state.chat;
  $("chat-title").textContent = (chat && chat.title) || "New chat";
  $("chat-tags").textContent = chat && chat.tags && chat.tags.length ? chat.tags.join(" · ") : "";
  $("rename-chat").hidden = $("delete-chat").hidden = !state.chatId;
}

export function updateChat(fields) {
  if (!state.chatId) return;
  state.chat = Object.assign(state.chat || chatList.find(state.chatId) || { id: state.chatId }, fields);
  chatList.update(state.chatId, fields);
  showChatHeader();
}

// Phone width: the chat list slides over.
export function closeSidebar() { document.body.classList.remove("sidebar-open"); }
$("open-sidebar").addEventListener("click", () => document.body.classList.add("sidebar-open"));
$("close-sidebar").addEventListener("click", closeSidebar);
