// The job browser's access to /v1: the token kept in this tab's session
// storage, calls that carry it, and the job listing's paging.

const KEY = "usher.jobs.token";

// token is the token this tab logged in with, or null.
export const token = () => sessionStorage.getItem(KEY);
// setToken keeps t for this tab.
export const setToken = (t) => sessionStorage.setItem(KEY, t);
// clearToken forgets the token (log out).
export const clearToken = () => sessionStorage.removeItem(KEY);

// ApiError is a /v1 answer that is not a success, with its status and the
// server's {error} text.
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// api calls /v1 path with the token; it answers the decoded JSON (null for
// 204) or throws an ApiError.
export async function api(method, path, body, tok = token()) {
  const headers = { Authorization: `Bearer ${tok}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch("/v1" + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON: reported below */ }
  if (!res.ok) throw new ApiError(res.status, data?.error || `${res.status} ${res.statusText}`);
  return data;
}

// FILTER_FIELDS are the conditions of GET /v1/jobs and of a bulk action's filter.
export const FILTER_FIELDS = ["queue", "state", "workflow", "key", "tag", "q", "from", "to"];

// filterOf keeps the non-empty conditions of f.
export function filterOf(f) {
  const out = {};
  for (const k of FILTER_FIELDS) if (f[k]) out[k] = f[k];
  return out;
}

// MAX_CALLS bounds the requests one page of the list may take: a page of
// a rare condition may come back short (each request examines at most
// 10 000 jobs) and still have a `next`.
export const MAX_CALLS = 20;

// fetchPage fills one page of `limit` jobs matching filter, from cursor
// after, in order ("desc" newest first): it follows `next` while the page
// is short, at most MAX_CALLS requests. It answers {jobs, next, calls};
// next is where the following page starts (absent at the end).
export async function fetchPage(filter, { after = "", limit = 50, order = "desc" } = {}) {
  const jobs = [];
  let next = after, calls = 0;
  do {
    const p = new URLSearchParams(filterOf(filter));
    p.set("order", order);
    p.set("limit", String(limit - jobs.length));
    if (next) p.set("after", next);
    const page = await api("GET", "/jobs?" + p);
    jobs.push(...page.jobs);
    next = page.next || "";
    calls++;
  } while (next && jobs.length < limit && calls < MAX_CALLS);
  return { jobs, next, calls };
}
