// Building the turn views' nodes and checking the URLs they show (render.js, item_views.js):
// text goes in as textContent, links and embeds only as http(s) URLs, images also as
// base64 data: URIs of a few image types.

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export function safeUrl(url) {
  try {
    const parsed = new URL(String(url), location.href);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch (_) { return null; }
}

export function imageUrl(url) {
  const s = String(url || "");
  if (/^data:image\/(png|jpe?g|gif|webp);base64,/i.test(s)) return s;
  return safeUrl(s);
}
