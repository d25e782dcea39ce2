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
