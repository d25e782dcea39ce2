// casebook console: small conveniences on top of pages that work without this file.
"use strict";

// Copy a permalink instead of following it, when the browser lets a page write the clipboard.
document.addEventListener("click", (event) => {
  const link = event.target.closest("a.permalink");
  if (!link || !navigator.clipboard || event.ctrlKey || event.metaKey) return;
  event.preventDefault();
  navigator.clipboard.writeText(link.href).then(
    () => { link.textContent = "link copied"; setTimeout(() => { link.textContent = "permalink"; }, 1500); },
    () => { window.location.href = link.href; },
  );
});

// The case editor: the reader's diagnostics as you type (the save checks them again).
const editor = document.querySelector("textarea[data-check]");
if (editor) {
  const list = document.getElementById("problems");
  const csrf = editor.form.querySelector("input[name=csrf]").value;
  let timer = null;
  let asked = 0;
  const show = (problems) => {
    list.replaceChildren(...problems.map((p) => {
      const item = document.createElement("li");
      item.className = p.severity;
      let text = p.line > 0 ? `line ${p.line}, column ${p.column}: ${p.message}` : p.message;
      if (p.pointer) text += ` (at ${p.pointer})`;
      if (p.hint) text += ` · hint: ${p.hint}`;
      item.textContent = text;
      return item;
    }));
    if (problems.length === 0) {
      const item = document.createElement("li");
      item.className = "ok";
      item.textContent = "no problems";
      list.append(item);
    }
  };
  const check = async () => {
    const mine = ++asked;
    const body = new URLSearchParams({ csrf, text: editor.value });
    try {
      const answer = await fetch(editor.dataset.check, { method: "POST", body, credentials: "same-origin" });
      if (answer.ok && mine === asked) show(await answer.json());
    } catch (_) { /* the save checks again */ }
  };
  editor.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(check, 250); });
}

// The review queue's keys: j/k move, a/r mark the selected case, / the filter, ? the keys.
const queue = document.getElementById("queue");
if (queue) {
  const items = [...queue.querySelectorAll("li.queue-item")];
  const help = document.getElementById("queue-help");
  // After a mark the page comes back without the case marked: the one that took its place is
  // selected.
  let at = Math.min(Number(sessionStorage.getItem("casebook-queue-at") || 0), Math.max(items.length - 1, 0));
  sessionStorage.removeItem("casebook-queue-at");
  const select = (i) => {
    if (items.length === 0) return;
    at = Math.max(0, Math.min(i, items.length - 1));
    items.forEach((item, n) => item.classList.toggle("selected", n === at));
    items[at].scrollIntoView({ block: "nearest" });
  };
  select(at);
  const mark = (state) => {
    const button = items[at] && items[at].querySelector(`button[name=state][value=${state}]`);
    if (!button) return;
    sessionStorage.setItem("casebook-queue-at", String(at));
    button.click();
  };
  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest("input, textarea, select");
    if (typing || event.ctrlKey || event.metaKey || event.altKey) {
      if (event.key === "Escape" && typing) typing.blur();
      return;
    }
    const keys = {
      j: () => select(at + 1),
      k: () => select(at - 1),
      a: () => mark("reviewed"),
      r: () => mark("rejected"),
      "/": () => document.getElementById("where").focus(),
      "?": () => { help.hidden = !help.hidden; },
    };
    if (keys[event.key]) {
      event.preventDefault();
      keys[event.key]();
    }
  });
  items.forEach((item, n) => item.addEventListener("click", () => select(n)));
}

// The cases table: "select all on this page" ticks (or clears) every row's box.
const selectPage = document.getElementById("select-page");
if (selectPage) {
  selectPage.addEventListener("change", () => {
    for (const box of document.querySelectorAll("input.pick")) box.checked = selectPage.checked;
  });
}

// Times: the server writes UTC (`<time datetime>`); show the reader's own time zone, keeping UTC
// in the title.
for (const time of document.querySelectorAll("time[datetime]")) {
  const when = new Date(time.getAttribute("datetime"));
  if (Number.isNaN(when.getTime())) continue;
  const utc = time.textContent;
  time.textContent = when.toLocaleString(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", timeZoneName: "short",
  });
  time.title = utc;
}
