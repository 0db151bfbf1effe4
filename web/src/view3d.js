// 3D figures: which projects draw them, and how asy's WebGL page (format
// html) is shown — in a sandboxed iframe, never in the app's own origin
// (docs/webapp.md).

// asy's modules that load three, directly or through others (asy 2.85;
// the server's list is internal/sandbox/detect3d.go's modules3D). A project
// is 3D when one of its files names one of them; a file of the project
// that imports three makes it 3D as well, since every file is looked at.
const MODULES_3D = ["bsp", "contour3", "graph3", "grid3", "labelpath3", "obj", "smoothcontour3", "solids", "three", "tube", "v3d"];
const NAMES_3D = new RegExp(String.raw`\b(?:import|access|from|unravel|include)\s+"?(?:${MODULES_3D.join("|")})(?:_\w*)?\b`);

/** is3D reports whether a project's files (of {content}) load asy's three. */
export function is3D(files) { return files.some((f) => NAMES_3D.test(f.content)); }

// The frame's own policy, on top of its sandbox: asy -offline inlines its
// viewer, so inline script and style are all it needs; nothing is fetched
// (no script, image, font or connection from anywhere), no form is sent.
export const FRAME_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'";

/**
 * frameDoc turns asy's html page into the document of the sandboxed frame.
 * asy's viewer reads window.top and window.parent to detect an embedding by
 * a same-origin page (asy's own web application); from an opaque-origin
 * frame those reads throw, so they are pointed at the frame's own window,
 * where the viewer runs as a page of its own and fills the frame. The
 * policy above goes first in <head>.
 */
export function frameDoc(html) {
  const doc = html.replace(/\bwindow\.(?:top|parent)\b/g, "window");
  const meta = `<meta http-equiv="Content-Security-Policy" content="${FRAME_CSP}">`;
  const head = /<head(?:\s[^>]*)?>/i.exec(doc);
  if (!head) return meta + doc;
  const at = head.index + head[0].length;
  return doc.slice(0, at) + "\n" + meta + doc.slice(at);
}

/**
 * frameOf is an iframe showing asy's html page: sandbox="allow-scripts"
 * without allow-same-origin gives it an opaque origin, so its script can
 * reach neither the app's DOM nor its localStorage, cookies or
 * WebSockets' origin; no allow-top-navigation, allow-popups, allow-forms
 * or allow-modals either.
 */
export function frameOf(html, label) {
  const f = document.createElement("iframe");
  f.setAttribute("sandbox", "allow-scripts");
  f.setAttribute("referrerpolicy", "no-referrer");
  f.title = label;
  f.dataset.format = "html";
  f.srcdoc = frameDoc(html);
  return f;
}
