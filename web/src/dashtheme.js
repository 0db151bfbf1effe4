// The dashboard's theme, chosen as the editor chooses it: localStorage
// "usher.theme" ("dark" or "light") when set, else the system's
// prefers-color-scheme (web/src/app.js, isDark). It sets
// <html data-theme>, which style.css's dark variables follow.
const KEY = "usher.theme";
const mq = matchMedia("(prefers-color-scheme: dark)");

export function isDark() { const t = localStorage.getItem(KEY); return t ? t === "dark" : mq.matches; }

// applyTheme sets the page's theme and the toggle's state, then calls each
// listener (the charts redraw in the theme's colours).
const listeners = [];
export function applyTheme() {
  const dark = isDark();
  document.documentElement.dataset.theme = dark ? "dark" : "light";
  document.getElementById("theme")?.setAttribute("aria-pressed", String(dark));
  for (const f of listeners) f(dark);
}

// onTheme calls f(dark) after every change of theme.
export function onTheme(f) { listeners.push(f); }

// initTheme applies the theme now, follows the system's and other tabs'
// changes, and makes #theme toggle it.
export function initTheme() {
  mq.addEventListener("change", applyTheme);
  addEventListener("storage", (e) => { if (e.key === KEY) applyTheme(); });
  const btn = document.getElementById("theme");
  if (btn) btn.onclick = () => { localStorage.setItem(KEY, isDark() ? "light" : "dark"); applyTheme(); };
  applyTheme();
}
