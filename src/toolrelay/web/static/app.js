// The page: sign-in, the chat list, the composer and the live chat, on the chat API.
// This module starts it; each part is a module of its own (their imports give the load
// order, and no module imports one that imports it):
//
//   page.js       `$`, the shared state, the banner, `guarded` (an API call's error)
//   composer.js   the composer's controls: ready, Send or Stop, its note, attached images
//   models.js     the model picker and the tools list under it
//   chats.js      the chat list in the sidebar, the open chat's header
//   chat_view.js  the open chat, live: its stream, events, snapshot and saved messages
//   send.js       sending a message, stopping a turn
//   signin.js     signing in and out, and what sign-in loads
//
// The three calls that go up that order are handed in here: a 401 anywhere shows the
// sign-in card, a chat picked in the list opens, a follow-up suggestion sends.

import { onSessionEnd } from "/static/page.js";
import { onChatPicked } from "/static/chats.js";
import { onFollowUp, openChat } from "/static/chat_view.js";
import { send } from "/static/send.js";
import { boot, showSignIn } from "/static/signin.js";

onSessionEnd(showSignIn);
onChatPicked(openChat);
onFollowUp(send);

boot();
