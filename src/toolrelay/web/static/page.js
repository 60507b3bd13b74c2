// What every part of the page shares: `$`, the one `state` (the user, the open chat, its
// stream and turn), the banner, and `guarded`, which every API call's error goes through.
// A 401 anywhere ends the session: `sessionEnded` shows the sign-in card (signin.js),
// which app.js hands in with `onSessionEnd`, as signin.js imports the modules that import
// this one.

import { ApiError } from "/static/api.js";

export const $ = (id) => document.getElementById(id);

export const state = {
  user: null,
  chatId: null,
  chat: null,       // the open chat's record (title, tags), once it has one
  stream: null,
  turn: null,       // the live TurnView, while a turn runs
  running: false,
  lastId: null,
  attachments: [],
  reread: false,    // a turn started from a branch: read the chat again when it ends
};

let showSignIn = null; // signin.js's, set by app.js before the page starts

export function onSessionEnd(show) { showSignIn = show; }

// The session ended: the sign-in card, saying why.
export function sessionEnded(message) { return showSignIn(message); }

// Any 401 from the API: the session ended (expired, revoked, signed out elsewhere).
export async function guarded(action) {
  try {
    return await action();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) { showSignIn(err.message); return undefined; }
    banner(err.message);
    return undefined;
  }
}

export function banner(message) {
  const node = $("banner");
  node.hidden = !message;
  node.textContent = message || "";
}
