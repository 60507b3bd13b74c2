// The composer's controls, as the other parts set them: whether it takes a message yet
// (setReady), Send or Stop (setRunning, with state.running), the note beside it
// (composeNote), and the images attached to the next message. Sending is send.js.

import { $, state } from "/static/page.js";

// The composer takes a message only once the models and the chat are there: sent
// earlier, it would name no model (or be wiped by the chat opening under it).
export function setReady(ready) {
  $("input").disabled = !ready;
  $("send").disabled = !ready;
  if (ready) $("input").focus();
}

// A message the composer refuses (no model to send to): said next to it, the text kept.
export function composeNote(message) {
  const note = $("compose-note");
  note.hidden = !message;
  note.textContent = message || "";
}

$("input").addEventListener("input", () => composeNote(null));
$("model").addEventListener("change", () => composeNote(null));

export function setRunning(running) {
  state.running = running;
  $("stop").hidden = !running;
  $("send").hidden = running;
}

// Images: picked or pasted, sent as data URLs in the message's content parts.
function addImage(file) {
  if (!file.type.startsWith("image/")) return;
  const reader = new FileReader();
  reader.onload = () => {
    state.attachments.push(String(reader.result));
    renderAttachments();
  };
  reader.readAsDataURL(file);
}

function renderAttachments() {
  const box = $("attachments");
  box.replaceChildren();
  state.attachments.forEach((url, i) => {
    const img = document.createElement("img");
    img.src = url;
    img.alt = `attachment ${i + 1}`;
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "icon";
    remove.textContent = "✕";
    remove.setAttribute("aria-label", `Remove attachment ${i + 1}`);
    remove.addEventListener("click", () => { state.attachments.splice(i, 1); renderAttachments(); });
    box.append(img, remove);
  });
}

export function clearAttachments() { state.attachments = []; renderAttachments(); }

$("attach").addEventListener("change", (e) => { for (const f of e.target.files) addImage(f); e.target.value = ""; });
$("input").addEventListener("paste", (e) => {
  for (const item of e.clipboardData.items) if (item.kind === "file") addImage(item.getAsFile());
});
