// The dashboard's theme: the choice the editor makes too (themepref.js),
// plus the header's toggle and the listeners that redraw the charts.
import { isDark, markDocument, onThemeChange, toggleTheme } from "./themepref.js";

const listeners = [];

// applyTheme marks the page and the toggle, then calls each listener (the
// charts redraw in the theme's colours).
function applyTheme() {
  markDocument();
  const dark = isDark();
  document.getElementById("theme")?.setAttribute("aria-pressed", String(dark));
  for (const f of listeners) f(dark);
}

// onTheme calls f(dark) after every change of theme.
export function onTheme(f) { listeners.push(f); }

// initTheme applies the theme now, follows the system's and other tabs'
// changes, and makes #theme toggle it.
export function initTheme() {
  onThemeChange(applyTheme);
  const btn = document.getElementById("theme");
  if (btn) btn.onclick = () => { toggleTheme(); applyTheme(); };
  applyTheme();
}
