// The theme choice the editor and the dashboard share: localStorage
// "usher.theme" ("dark" or "light") once the user has toggled it, else the
// system's prefers-color-scheme. Each page marks <html data-theme>, which
// style.css reads.
const KEY = "usher.theme";
const system = matchMedia("(prefers-color-scheme: dark)");

/** isDark reports whether the page should be dark. */
export function isDark() {
  const t = localStorage.getItem(KEY);
  return t ? t === "dark" : system.matches;
}

/** toggleTheme stores the opposite of the current choice. */
export function toggleTheme() { localStorage.setItem(KEY, isDark() ? "light" : "dark"); }

/** markDocument sets <html data-theme> to "dark" or "light". */
export function markDocument() { document.documentElement.dataset.theme = isDark() ? "dark" : "light"; }

/**
 * onThemeChange calls f when the system's scheme changes or another page of
 * the app (another tab) toggles the theme.
 */
export function onThemeChange(f) {
  system.addEventListener("change", f);
  addEventListener("storage", (e) => { if (e.key === KEY || e.key === null) f(); });
}
