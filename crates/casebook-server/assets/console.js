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
