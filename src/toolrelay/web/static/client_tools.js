// Tools that run in the browser (R9): declared with each message, called through
// `execute:tool`, answered with POST /api/chats/{id}/tool-results.

const MAX_FILE_CHARS = 200_000;

export const CLIENT_TOOLS = [
  {
    type: "function",
    function: {
      name: "browser_time",
      description: "The user's current local date and time, UTC offset and IANA time zone, read from their browser.",
      parameters: { type: "object", properties: {} },
    },
  },
  {
    type: "function",
    function: {
      name: "read_user_file",
      description: "Ask the user to pick a text file on their device; returns its name, size and text. Nothing is read unless the user picks a file.",
      parameters: {
        type: "object",
        properties: { purpose: { type: "string", description: "Why the file is needed (shown to the user)." } },
      },
    },
  },
];

export function browserTime(now = new Date()) {
  const offset = -now.getTimezoneOffset();
  const sign = offset >= 0 ? "+" : "-";
  const pad = (n) => String(Math.floor(Math.abs(n))).padStart(2, "0");
  return {
    iso: now.toISOString(),
    local: now.toLocaleString(),
    time_zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    utc_offset: `${sign}${pad(offset / 60)}:${pad(offset % 60)}`,
  };
}

// The file tool needs the user's click (browsers open a file picker only on a gesture):
// it shows a panel and resolves when the user picks a file or declines.
export function readUserFile(params, showPanel) {
  return new Promise((resolve) => {
    const box = document.createElement("div");
    box.className = "client-tool";
    const text = document.createElement("p");
    const purpose = params && typeof params.purpose === "string" ? params.purpose : "";
    text.textContent = purpose ? `The model asks for a file: ${purpose}` : "The model asks you to pick a file.";
    const input = document.createElement("input");
    input.type = "file";
    input.className = "file-pick";
    input.setAttribute("aria-label", "Pick a file for the model");
    const decline = document.createElement("button");
    decline.type = "button";
    decline.className = "danger";
    decline.textContent = "Decline";
    const done = (result, note) => {
      box.replaceChildren(Object.assign(document.createElement("p"), { className: "muted", textContent: note }));
      resolve(result);
    };
    input.addEventListener("change", async () => {
      const file = input.files && input.files[0];
      if (!file) return;
      const body = await file.text();
      done({
        name: file.name, size: file.size, type: file.type || "text/plain",
        truncated: body.length > MAX_FILE_CHARS, text: body.slice(0, MAX_FILE_CHARS),
      }, `Sent ${file.name}.`);
    });
    decline.addEventListener("click", () => done("Error: the user declined to pick a file.", "Declined."));
    box.append(text, input, decline);
    showPanel(box);
  });
}

export async function runClientTool(data, showPanel) {
  if (data.name === "browser_time") return browserTime();
  if (data.name === "read_user_file") return readUserFile(data.params || {}, showPanel);
  return `Error: this browser has no tool named ${data.name}.`;
}
