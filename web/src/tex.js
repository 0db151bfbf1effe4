// The TeX page: the server's LaTeX packages and font families (GET
// /api/tex), filtered as the user types.
const $ = (id) => document.getElementById(id);
let tex = { packages: [], fontFamilies: [] };

// Families a user asks for by a well-known name.
const KNOWN = { ptm: "Times", phv: "Helvetica", pcr: "Courier", ppl: "Palatino", pbk: "Bookman", pag: "Avant Garde", pnc: "New Century Schoolbook", pzc: "Zapf Chancery", cmr: "Computer Modern", lmr: "Latin Modern" };

function render() {
  const q = $("tex-filter").value.trim().toLowerCase();
  const fonts = tex.fontFamilies.filter((f) => !q || f.name.includes(q) || (KNOWN[f.name] || "").toLowerCase().includes(q));
  const pkgs = tex.packages.filter((p) => !q || p.toLowerCase().includes(q));
  const tbody = $("tex-fonts").tBodies[0];
  tbody.textContent = "";
  for (const f of fonts) {
    const tr = tbody.insertRow();
    tr.insertCell().textContent = f.name + (KNOWN[f.name] ? ` (${KNOWN[f.name]})` : "");
    tr.insertCell().textContent = f.encodings.join(", ");
  }
  const ul = $("tex-packages");
  ul.textContent = "";
  const frag = document.createDocumentFragment();
  for (const p of pkgs) frag.append(Object.assign(document.createElement("li"), { textContent: p }));
  ul.append(frag);
  $("tex-status").textContent = `${pkgs.length} of ${tex.packages.length} packages, ${fonts.length} of ${tex.fontFamilies.length} font families`;
}

fetch("/api/tex").then(async (r) => {
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  tex = body;
  render();
}).catch((e) => { $("tex-status").textContent = "the TeX list could not be loaded: " + e.message; });
$("tex-filter").addEventListener("input", render);
