// The model picker (GET /v1/models; the one last picked is kept in localStorage) and,
// under it, the tools the model may call (GET /api/tools). Both are read at sign-in.

import { api } from "/static/api.js";
import { $, banner } from "/static/page.js";

export async function loadModels() {
  const select = $("model");
  const models = await api("GET", "/v1/models");
  select.replaceChildren();
  for (const m of models.data) {
    const option = document.createElement("option");
    option.value = option.textContent = m.id;
    select.append(option);
  }
  const saved = localStorage.getItem("toolrelay.model");
  if (saved && models.data.some((m) => m.id === saved)) select.value = saved;
  if (!models.data.length) banner("No model is configured on this server: add one to toolrelay.toml and restart it.");
}

// What the model may call (GET /api/tools: the built-in tools, tool files and servers),
// under the model picker; a route's own `tools` list may offer fewer.
export async function loadTools() {
  const { data } = await api("GET", "/api/tools");
  const usable = data.filter((t) => t.status === "ok");
  const list = $("tools-list");
  list.replaceChildren(...usable.map((t) => {
    const item = document.createElement("li");
    const name = document.createElement("code");
    name.textContent = t.name;
    const source = document.createElement("span");
    source.className = "tool-source";
    source.textContent = t.source;
    item.title = t.description;
    item.append(name, " ", source);
    return item;
  }));
  $("tools-summary").textContent = `Tools: ${usable.map((t) => t.name).join(", ") || "none"}`;
  $("tools").hidden = false;
}

$("model").addEventListener("change", () => localStorage.setItem("toolrelay.model", $("model").value));
