// Signing in and out: the session read at start (boot), the sign-in card (the key posted
// once, for a session cookie), what sign-in loads (the models, the chat list, the tools,
// the chat in the address), and signing out. The server's info also says which hosts
// Markdown images may load from.

import { api, ApiError, setCsrf } from "/static/api.js";
import { setImageHosts } from "/static/markdown.js";
import { $, state } from "/static/page.js";
import { setReady } from "/static/composer.js";
import { loadModels, loadTools } from "/static/models.js";
import { chatList } from "/static/chats.js";
import { closeStream, newChat, openChat } from "/static/chat_view.js";

export async function boot() {
  try {
    const session = await api("GET", "/api/session");
    await signedIn(session);
  } catch (err) {
    showSignIn(err instanceof ApiError && err.code === "session_revoked" ? err.message : null);
  }
}

export async function showSignIn(message) {
  state.user = null;
  closeStream();
  setReady(false);
  $("app").hidden = true;
  $("signin").hidden = false;
  const error = $("signin-error");
  error.hidden = !message;
  error.textContent = message || "";
  $("signin-key").focus();
  try {
    const info = await loadInfo();
    const hint = $("setup-hint");
    hint.hidden = !info.setup_hint;
    hint.textContent = info.setup_hint || "";
  } catch (_) { /* the form still works */ }
}

// The server's version, models, setup hint, and the hosts images may load from.
async function loadInfo() {
  const info = await api("GET", "/api/info");
  setImageHosts(info.image_hosts);
  return info;
}

$("signin-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const input = $("signin-key");
  const key = input.value.trim();
  input.value = "";
  try {
    await signedIn(await api("POST", "/api/session", { key }));
  } catch (err) {
    showSignIn(err.status === 401 ? "That key is not valid (or was revoked)." : err.message);
  }
});

async function signedIn(session) {
  state.user = session.user;
  setCsrf(session.csrf);
  $("signin").hidden = true;
  $("app").hidden = false;
  $("who").textContent = session.user.name;
  setReady(false);
  await Promise.all([loadModels(), chatList.reset(), loadInfo().catch(() => null)]);
  loadTools().catch(() => null); // starts the tool servers: never holds the composer
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("chat");
  if (fromHash) openChat(fromHash);
  else newChat();
  setReady(true);
}

$("sign-out").addEventListener("click", async () => {
  try { await api("DELETE", "/api/session"); } catch (_) { /* signed out locally anyway */ }
  setCsrf(null);
  history.replaceState(null, "", location.pathname);
  showSignIn(null);
});
