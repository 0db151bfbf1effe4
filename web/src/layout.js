// The narrow layout (phones, up to 700 px wide): the page's three panes,
// files, editor and result, become tabs under a tab bar, one shown at a
// time; wider screens show them side by side and hide the bar (style.css
// decides which layout applies; docs/webapp.md, "Layouts").
const NARROW = matchMedia("(max-width: 700px)");
const PANES = [
  { key: "files", selector: "main > nav", label: "Files" },
  { key: "edit", selector: "#edit", label: "Editor" },
  { key: "view", selector: "#view", label: "Result" },
];

/**
 * setupLayout adds the tab bar at the top of <main> and returns {show(key)}. An
 * explicit compile (the event "usher:run" without detail.live) shows the
 * result tab on a narrow screen; a live preview leaves the editor in view;
 * opening a file from the files tab shows the editor.
 */
export function setupLayout() {
  const bar = document.createElement("div");
  bar.className = "tabs";
  bar.setAttribute("role", "tablist");
  bar.setAttribute("aria-label", "panes");
  const tabs = PANES.map((p) => tabFor(p, bar));
  document.querySelector("main").prepend(bar); // inside the landmark
  const show = (key, focus = false) => {
    for (const t of tabs) {
      const on = t.key === key;
      t.pane.classList.toggle("pane-on", on);
      t.tab.setAttribute("aria-selected", String(on));
      t.tab.tabIndex = on ? 0 : -1;
      if (on && focus) t.tab.focus();
    }
  };
  for (const t of tabs) t.tab.onclick = () => show(t.key);
  bar.addEventListener("keydown", (e) => {
    const i = tabs.findIndex((t) => t.tab === document.activeElement);
    const to = { ArrowLeft: i - 1, ArrowRight: i + 1, Home: 0, End: tabs.length - 1 }[e.key];
    if (i < 0 || to === undefined) return;
    e.preventDefault();
    show(tabs[(to + tabs.length) % tabs.length].key, true);
  });
  const roles = () => { for (const t of tabs) setPaneRole(t, NARROW.matches); };
  NARROW.addEventListener("change", roles);
  roles();
  show("edit");
  document.addEventListener("usher:run", (e) => { if (!e.detail?.live && NARROW.matches) show("view"); });
  // Opening a file from the files tab shows it. (Capture: the list is
  // redrawn by the click, so its button is gone by the bubbling phase.)
  tabs[0].pane.addEventListener("click", (e) => { if (NARROW.matches && e.target.closest("#files button")) show("edit"); }, true);
  return { show };
}

function tabFor(p, bar) {
  const pane = document.querySelector(p.selector);
  if (!pane.id) pane.id = p.key + "-pane";
  const tab = document.createElement("button");
  tab.type = "button";
  tab.id = "tab-" + p.key;
  tab.textContent = p.label;
  tab.setAttribute("role", "tab");
  tab.setAttribute("aria-controls", pane.id);
  bar.append(tab);
  return { key: p.key, pane, tab };
}

// setPaneRole makes a pane a tab panel while the tabs are in use, and gives
// it its own role back (navigation, region) when the panes sit side by side.
function setPaneRole(t, narrow) {
  if (narrow) {
    t.pane.setAttribute("role", "tabpanel");
    t.pane.setAttribute("aria-labelledby", t.tab.id);
  } else {
    t.pane.removeAttribute("role");
    t.pane.removeAttribute("aria-labelledby");
  }
}
