// The chat API as the page uses it: JSON over fetch with the session cookie,
// the CSRF token on every write, and errors turned into messages a user can act on.

let csrf = null;

export function setCsrf(token) { csrf = token; }

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const HINTS = {
  session_expired: "Your session ended: sign in again.",
  missing_api_key: "You are signed out (the session cookie is gone): sign in again.",
  session_revoked: "The key of this session was revoked: sign in with another key.",
  model_not_found: "No such model here: pick another one, or ask the operator to add it.",
  turn_running: "A turn is still running in this chat: stop it or wait for it.",
};

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && csrf) headers["X-CSRF-Token"] = csrf;
  let response;
  try {
    response = await fetch(path, {
      method, headers, credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new ApiError(0, "The server cannot be reached: check that toolrelay is running, then retry.", "offline");
  }
  if (response.status === 204) return null;
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (!response.ok) {
    const error = (data && data.error) || {};
    const message = HINTS[error.code] || error.message || `HTTP ${response.status}`;
    throw new ApiError(response.status, message, error.code);
  }
  return data;
}
