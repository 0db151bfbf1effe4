// Client of the /asy queue protocol (docs/protocol.md).

/** sha256hex returns the lowercase hex SHA-256 of bytes. */
export async function sha256hex(bytes) {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

const uploaded = new Set(JSON.parse(localStorage.getItem("usher.uploaded") || "[]"));
function remember(hash) {
  uploaded.add(hash);
  localStorage.setItem("usher.uploaded", JSON.stringify([...uploaded].slice(-500)));
}

// fileBytes is a project file's bytes: a Uint8Array content as it is (a
// binary file), decoded from base64 when its encoding says so, else its
// content as UTF-8 text.
function fileBytes(f) {
  if (f.content instanceof Uint8Array) return f.content;
  if (f.encoding === "base64") return Uint8Array.from(atob(f.content), (c) => c.charCodeAt(0));
  return new TextEncoder().encode(f.content);
}

/**
 * compile runs one task. files: [{filename, main, content, encoding?}],
 * content a string (base64 when encoding says so) or a Uint8Array; opts:
 * {timeout (undefined: a default task), format, interactive} (an
 * interactive task, a shell, may have no files; the returned input(text)
 * feeds it);
 * on: {queue(m), output(text, stream), result(bytes, format), complete(m), denied(m),
 * closed() when the connection ends before complete or denied, error(text),
 * message(m) for other messages}. Returns {cancel, input}; after cancel nothing is called.
 */
export function compile(files, opts, on) {
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/asy";
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  let pending = null; // header awaiting its binary frame
  let finished = false;
  let ran = false; const early = []; // input typed before "run" went out
  const sendInput = (text) => { send("input"); ws.send(new TextEncoder().encode(text)); };
  const entries = files.map((f) => ({ ...f, bytes: fileBytes(f) }));
  const send = (verb, o) => ws.send(o === undefined ? verb : verb + " " + JSON.stringify(o));
  function add(e, restore) {
    if (restore) send("add", { filename: e.filename, main: !!e.main, hash: e.hash, restore: true });
    else { send("add", { filename: e.filename, main: !!e.main, hash: e.hash }); ws.send(e.bytes); remember(e.hash); }
  }
  ws.onopen = async () => {
    for (const e of entries) e.hash = await sha256hex(e.bytes);
    for (const e of entries) add(e, uploaded.has(e.hash));
    send("options", { timeout: opts.timeout, format: opts.format, interactive: opts.interactive || undefined });
    send("run");
    ran = true;
    for (const text of early.splice(0)) sendInput(text);
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data !== "string") {
      const h = pending; pending = null;
      if (!h) return;
      if (h.type === "output") on.output?.(new TextDecoder().decode(ev.data), h.stream);
      else if (h.type === "result") on.result?.(new Uint8Array(ev.data), h.format);
      return;
    }
    const sp = ev.data.indexOf(" ");
    const verb = sp < 0 ? ev.data : ev.data.slice(0, sp);
    const body = sp < 0 ? {} : JSON.parse(ev.data.slice(sp + 1));
    const m = Array.isArray(body) ? { type: verb, list: body } : { ...body, type: verb };
    switch (m.type) {
      case "queue": on.queue?.(m); break;
      case "output": case "result": pending = m; break;
      case "missing":
        for (const miss of m.list || []) {
          const e = entries.find((x) => x.filename === miss.filename);
          if (e) { uploaded.delete(e.hash); add(e, false); }
        }
        send("run");
        break;
      case "complete": finished = true; on.complete?.(m); ws.close(); break;
      case "denied": finished = true; on.denied?.(m); ws.close(); break;
      default: on.message?.(m);
    }
  };
  ws.onclose = () => { if (!finished) on.closed?.(); };
  ws.onerror = () => on.error?.("connection error");
  return {
    cancel() { finished = true; ws.onmessage = ws.onerror = null; ws.close(); },
    // input sends text to an interactive task's stdin; false when the connection is not open.
    input(text) {
      if (finished || ws.readyState > WebSocket.OPEN) return false;
      if (ran) sendInput(text); else early.push(text);
      return true;
    },
  };
}
