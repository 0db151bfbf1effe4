// /v1/stats, read once per refresh, with rates worked out from the
// difference of successive counters (the server keeps totals only).
import { api } from "./api.js";

const samples = []; // {at, counters}, the last WINDOW_MS of them
const WINDOW_MS = 10000;

// loadStats fetches /v1/stats and records its counters.
export async function loadStats() {
  const s = await api("GET", "/stats");
  const at = performance.now();
  samples.push({ at, counters: s.counters || {} });
  while (samples.length > 2 && at - samples[0].at > WINDOW_MS) samples.shift();
  return s;
}

// rates answers each counter's change per second over the samples kept,
// or null before there are two of them.
export function rates() {
  if (samples.length < 2) return null;
  const a = samples[0], b = samples[samples.length - 1];
  const secs = (b.at - a.at) / 1000;
  if (secs <= 0) return null;
  const out = {};
  for (const k of Object.keys(b.counters)) out[k] = Math.max(0, (b.counters[k] - (a.counters[k] || 0)) / secs);
  return out;
}
