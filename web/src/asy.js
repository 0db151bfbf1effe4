// Asymptote language mode for CodeMirror 6 (a StreamLanguage tokenizer).
import { StreamLanguage } from "@codemirror/language";

export const keywords = new Set("if else while for do return break continue struct typedef import access from unravel include new operator static public private restricted true false null this cycle controls tension atleast and".split(" "));
export const types = new Set("void bool bool3 int real string pair triple path path3 guide guide3 pen picture frame transform transform3 surface file tensionSpecifier curlSpecifier label Label marker arrowbar projection light material position align object".split(" "));

export const asymptote = StreamLanguage.define({
  name: "asymptote",
  startState: () => ({ comment: false }),
  token(stream, state) {
    if (state.comment) {
      if (stream.skipTo("*/")) { stream.next(); stream.next(); state.comment = false; } else stream.skipToEnd();
      return "comment";
    }
    if (stream.eatSpace()) return null;
    if (stream.match("//")) { stream.skipToEnd(); return "comment"; }
    if (stream.match("/*")) { state.comment = true; return "comment"; }
    const ch = stream.peek();
    if (ch === '"' || ch === "'") {
      stream.next();
      let esc = false, c;
      while ((c = stream.next()) != null) { if (c === ch && !esc) break; esc = !esc && c === "\\"; }
      return "string";
    }
    if (stream.match(/^(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?/)) return "number";
    if (stream.match(/^[A-Za-z_]\w*/)) {
      const w = stream.current();
      if (keywords.has(w)) return "keyword";
      if (types.has(w)) return "typeName";
      return "variableName";
    }
    if (stream.match(/^(---|\.\.|--|\^\^|::|&&|\|\||[-+*\/^%<>=!&|]=?|[~@#$?:])/)) return "operator";
    if (/[()[\]{}]/.test(ch)) { stream.next(); return "bracket"; }
    stream.next();
    return null;
  },
  languageData: { commentTokens: { line: "//", block: { open: "/*", close: "*/" } } },
});
