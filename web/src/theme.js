// Editor themes (light and dark) with a highlight style for the Asymptote tokens.
import { EditorView } from "@codemirror/view";
import { HighlightStyle, syntaxHighlighting } from "@codemirror/language";
import { tags as t } from "@lezer/highlight";

function style(c) {
  return syntaxHighlighting(HighlightStyle.define([
    { tag: t.keyword, color: c.kw, fontWeight: "bold" },
    { tag: t.typeName, color: c.type },
    { tag: t.string, color: c.str },
    { tag: t.comment, color: c.comment, fontStyle: "italic" },
    { tag: t.number, color: c.num },
    { tag: t.operator, color: c.op },
  ]));
}
export const lightish = [
  EditorView.theme({ "&": { backgroundColor: "#fff", color: "#1e1e1e" } }, { dark: false }),
  style({ kw: "#7a1fa2", type: "#0b5cad", str: "#a31515", comment: "#6a737d", num: "#098658", op: "#b35900" }),
];
export const oneDarkish = [
  EditorView.theme({
    "&": { backgroundColor: "#1e1f24", color: "#d7dae0" },
    ".cm-gutters": { backgroundColor: "#1e1f24", color: "#7d8590", border: "none" },
    ".cm-activeLine, .cm-activeLineGutter": { backgroundColor: "#2a2c33" },
    "&.cm-focused .cm-cursor": { borderLeftColor: "#fff" },
  }, { dark: true }),
  style({ kw: "#c678dd", type: "#61afef", str: "#98c379", comment: "#959ba5", num: "#d19a66", op: "#56b6c2" }),
];
