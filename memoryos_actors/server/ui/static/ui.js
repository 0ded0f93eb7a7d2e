// The memory page's only script: keyboard shortcuts and a live filter. Every page works
// without it (forms and links do the work on the server).
"use strict";

function typing(el) {
  return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
}

// "/" jumps to the page's search or filter box.
document.addEventListener("keydown", (event) => {
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  if (typing(document.activeElement)) return;
  const box = document.querySelector("[data-search]");
  if (!box) return;
  event.preventDefault();
  box.focus();
  box.select();
});

// The users filter narrows the rows shown while typing; Enter asks the server (all pages).
document.addEventListener("DOMContentLoaded", () => {
  const box = document.querySelector("[data-filter]");
  if (!box) return;
  const table = document.getElementById(box.dataset.filter);
  if (!table) return;
  box.addEventListener("input", () => {
    const needle = box.value.trim().toLowerCase();
    for (const row of table.tBodies[0].rows) {
      const id = (row.dataset.user || "").toLowerCase();
      row.hidden = needle !== "" && !id.includes(needle);
    }
  });
});
