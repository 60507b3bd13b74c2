// The page's one redraw queue: views (a turn, its items) change their state as events
// come and `schedule` themselves; the DOM is touched once per animation frame. Its own
// module so every view shares the one queue (render.js, item_views.js).

const FRAME_BUDGET_MS = 3;

// Views with changes, flushed together once per animation frame within a time budget
// (what does not fit waits for the next frame: no long task however fast events come).
let queued = new Set();
let frame = 0;
let afterFlush = null;

export function onFlushed(callback) { afterFlush = callback; }

export function schedule(view) {
  queued.add(view);
  if (!frame) frame = requestAnimationFrame(flushAll);
}

function flushAll() {
  frame = 0;
  const deadline = performance.now() + FRAME_BUDGET_MS;
  const views = queued;
  queued = new Set();
  for (const view of views) {
    if (performance.now() > deadline) { queued.add(view); continue; }
    view.flush(deadline);
  }
  if (afterFlush) afterFlush();
  if (queued.size && !frame) frame = requestAnimationFrame(flushAll);
}
