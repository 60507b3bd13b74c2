// Versions of a message (issue 29 item 8): a chat's messages form a tree, the page shows
// its current branch. A message with siblings (answers regenerated, questions edited)
// gets ‹ 1/2 › to switch; an answer can be regenerated (the last one continued too),
// a question edited (a new branch from it). `actions` talk to the chat API.

function button(cls, text, label, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = `link ${cls}`;
  b.textContent = text;
  if (label) b.setAttribute("aria-label", label);
  b.addEventListener("click", onClick);
  return b;
}

// The bar under a saved message `m` (from a snapshot or a page of the chat).
export function branchBar(m, isLast, actions) {
  const bar = document.createElement("div");
  bar.className = `branch-bar ${m.role}-bar`;
  const siblings = Array.isArray(m.siblings) ? m.siblings : [];
  const at = siblings.indexOf(m.id);
  if (siblings.length > 1 && at >= 0) {
    const nav = document.createElement("span");
    nav.className = "branch-nav";
    const prev = button("branch-prev", "‹", "Previous version", () => actions.switchTo(siblings[at - 1]));
    const next = button("branch-next", "›", "Next version", () => actions.switchTo(siblings[at + 1]));
    prev.disabled = at === 0;
    next.disabled = at === siblings.length - 1;
    const count = document.createElement("span");
    count.className = "branch-count";
    count.textContent = `${at + 1}/${siblings.length}`;
    nav.append(prev, count, next);
    bar.append(nav);
  }
  if (m.role === "assistant") {
    bar.append(button("regenerate", "Regenerate", "Regenerate this answer", () => actions.regenerate(m.id)));
    if (isLast) bar.append(button("continue", "Continue", "Continue this answer", () => actions.continueAnswer(m.id)));
  } else if (m.role === "user" && typeof m.content === "string") {
    bar.append(button("edit", "Edit", "Edit this message", () => editor(bar, m, actions)));
  }
  return bar;
}

// Editing a question in place: its text in a box; sending starts a new branch from it.
function editor(bar, m, actions) {
  const form = document.createElement("form");
  form.className = "branch-edit";
  const box = document.createElement("textarea");
  box.value = m.content;
  box.rows = 3;
  box.setAttribute("aria-label", "Edited message");
  const send = button("edit-send", "Send", null, () => {});
  send.type = "submit";
  const cancel = button("edit-cancel", "Cancel", null, () => form.replaceWith(bar));
  form.append(box, send, cancel);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = box.value.trim();
    if (text) actions.edit(m.id, text);
  });
  bar.replaceWith(form);
  box.focus();
}
