// A few promise helpers over the plain IndexedDB API (no library).

/** openDB opens (and on first use creates) the app's database. */
export function openDB(name, version, upgrade) {
  return new Promise((resolve, reject) => {
    const r = indexedDB.open(name, version);
    r.onupgradeneeded = () => upgrade(r.result);
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
    r.onblocked = () => reject(new Error("the project store is held open by an older version of the app in another tab"));
  });
}

/**
 * txn runs body(stores, t) in one transaction over names and resolves
 * with the value given to t.done once the transaction has committed; it
 * rejects (and nothing is written) when body or a callback throws, t.fail
 * is called, or a request fails. body works with callbacks (t.on), never
 * awaits: a transaction ends at the first await of anything else.
 */
export function txn(db, names, mode, body) {
  return new Promise((resolve, reject) => {
    const tx = db.transaction(names, mode);
    const stores = Object.fromEntries([].concat(names).map((n) => [n, tx.objectStore(n)]));
    let result, failure = null;
    const fail = (e) => { if (!failure) failure = e; try { tx.abort(); } catch { /* ended already */ } };
    tx.oncomplete = () => resolve(result);
    tx.onabort = () => reject(failure || tx.error || new Error("the project store refused the change"));
    const t = {
      done(v) { result = v; },
      fail,
      on(r, then) { r.onsuccess = () => { try { then(r.result); } catch (e) { fail(e); } }; },
    };
    try {
      body(stores, t);
    } catch (e) { fail(e); }
  });
}
