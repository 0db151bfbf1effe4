// The examples gallery: a dialog of cards by category (GET /api/examples).
// Choosing one asks for a new project with its files through the
// "usher:new-project" event, which the project store handles.
const $ = (id) => document.getElementById(id);
let examples = null; // the server's list, fetched on first open

// openGallery shows the dialog, focused on its first card.
export async function openGallery() {
  const dlg = dialog();
  dlg.showModal();
  const body = dlg.querySelector(".gallery-body");
  if (!examples) {
    body.textContent = "loading examples…";
    try {
      const r = await fetch("/api/examples");
      const data = await r.json();
      if (!r.ok) throw new Error(data.error || r.statusText);
      examples = data;
    } catch (e) {
      body.textContent = "the examples could not be loaded: " + e.message;
      return;
    }
  }
  render(body);
  body.querySelector("button.gallery-card")?.focus();
}

function dialog() {
  let dlg = $("gallery");
  if (dlg) return dlg;
  dlg = document.createElement("dialog");
  dlg.id = "gallery";
  dlg.setAttribute("aria-labelledby", "gallery-title");
  const head = document.createElement("div");
  head.className = "gallery-head";
  const h = Object.assign(document.createElement("h2"), { id: "gallery-title", textContent: "Examples" });
  const close = Object.assign(document.createElement("button"), { textContent: "✕ close", type: "button" });
  close.setAttribute("aria-label", "close the examples");
  close.onclick = () => dlg.close();
  head.append(h, close);
  const body = document.createElement("div");
  body.className = "gallery-body";
  dlg.append(head, body);
  // A click on the backdrop (outside the dialog's box) closes it too.
  dlg.addEventListener("click", (e) => { if (e.target === dlg) dlg.close(); });
  document.body.append(dlg);
  return dlg;
}

function render(body) {
  body.textContent = "";
  const byCategory = new Map();
  for (const ex of examples) {
    if (!byCategory.has(ex.category)) byCategory.set(ex.category, []);
    byCategory.get(ex.category).push(ex);
  }
  for (const [category, list] of byCategory) {
    const section = document.createElement("section");
    const id = "gallery-cat-" + category.replace(/\W+/g, "-").toLowerCase();
    section.setAttribute("aria-labelledby", id);
    section.append(Object.assign(document.createElement("h3"), { id, textContent: category }));
    const ul = document.createElement("ul");
    for (const ex of list) {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.className = "gallery-card";
      b.dataset.id = ex.id;
      const title = Object.assign(document.createElement("strong"), { textContent: ex.title });
      const desc = Object.assign(document.createElement("span"), { textContent: ex.description });
      const fmts = Object.assign(document.createElement("small"), { textContent: ex.formats.join(" · ") + " — " + ex.files.map((f) => f.filename).join(", ") });
      b.append(title, desc, fmts);
      b.onclick = () => choose(ex);
      li.append(b);
      ul.append(li);
    }
    section.append(ul);
    body.append(section);
  }
}

function choose(ex) {
  $("gallery").close();
  const files = ex.files.map((f) => ({ ...f }));
  document.dispatchEvent(new CustomEvent("usher:new-project", { detail: { name: ex.title, files } }));
  // The first format the example offers, unless the chosen one is offered.
  const fmt = $("format");
  if (fmt && !ex.formats.includes(fmt.value) && [...fmt.options].some((o) => o.value === ex.formats[0])) fmt.value = ex.formats[0];
}
