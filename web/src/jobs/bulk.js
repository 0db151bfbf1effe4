// Actions on many jobs: POST /v1/jobs/actions over a list of ids, or over
// everything a filter selects, one bounded batch per request, following
// `next` until it is absent and reporting after each batch.
import { api } from "./api.js";

// BATCH is the jobs one request acts on (the server's default and a
// round figure under its maximum of 1000).
export const BATCH = 500;

// actOnIds applies action to the jobs ids (at most 1000) in one request.
export function actOnIds(action, ids) {
  return api("POST", "/jobs/actions", { action, ids });
}

// actOnFilter applies action to every job filter selects, batch after
// batch. progress(totals, more) is called after each; stopped() is asked
// before each request and ends the loop when true. It answers the totals
// {matched, changed, errors, batches, stopped}.
export async function actOnFilter(action, filter, progress, stopped) {
  const totals = { matched: 0, changed: 0, errors: [], batches: 0, stopped: false };
  let after = "";
  do {
    if (stopped()) { totals.stopped = true; break; }
    const r = await api("POST", "/jobs/actions", { action, filter, after, limit: BATCH });
    totals.matched += r.matched;
    totals.changed += r.changed;
    totals.errors.push(...(r.errors || []));
    totals.batches++;
    after = r.next || "";
    progress(totals, Boolean(after));
  } while (after);
  return totals;
}
