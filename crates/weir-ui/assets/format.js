// Formatting of numbers, sizes, durations and times for display.

const dash = "—";

/** 1234567 -> "1.23M". */
export function count(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return dash;
  const abs = Math.abs(n);
  if (abs >= 1e9) return `${(n / 1e9).toFixed(2)}G`;
  if (abs >= 1e6) return `${(n / 1e6).toFixed(2)}M`;
  if (abs >= 1e4) return `${(n / 1e3).toFixed(1)}k`;
  if (Number.isInteger(n)) return String(n);
  return n.toFixed(abs < 10 ? 1 : 0);
}

/** Rows per second. */
export function rate(n) {
  return n === null || n === undefined ? dash : `${count(n)}/s`;
}

/** Bytes with a binary unit. */
export function bytes(n) {
  if (n === null || n === undefined) return dash;
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
}

/** Milliseconds as "850 ms", "12.3 s", "4m 05s", "2h 03m". */
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return dash;
  const abs = Math.abs(ms);
  const sign = ms < 0 ? "-" : "";
  if (abs < 1000) return `${sign}${Math.round(abs)} ms`;
  if (abs < 60_000) return `${sign}${(abs / 1000).toFixed(1)} s`;
  const s = Math.floor(abs / 1000);
  if (s < 3600) return `${sign}${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  if (s < 172_800) {
    return `${sign}${Math.floor(s / 3600)}h ${String(Math.floor(s / 60) % 60).padStart(2, "0")}m`;
  }
  return `${sign}${Math.floor(s / 86_400)}d ${String(Math.floor(s / 3600) % 24).padStart(2, "0")}h`;
}

/** A percentage with no decimals. */
export function percent(fraction) {
  if (fraction === null || fraction === undefined || Number.isNaN(fraction)) return dash;
  return `${Math.round(fraction * 100)}%`;
}

/** An RFC 3339 string or Unix ms as local "YYYY-MM-DD HH:MM:SS". */
export function time(value) {
  if (value === null || value === undefined) return dash;
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  const p = (n) => String(n).padStart(2, "0");
  return (
    `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`
  );
}

/** "in 12 s" / "3 s ago" relative to now. */
export function relative(value) {
  const t = new Date(value).getTime();
  if (Number.isNaN(t)) return dash;
  const diff = t - Date.now();
  return diff >= 0 ? `in ${duration(diff)}` : `${duration(-diff)} ago`;
}

/** The first `n` characters of an id or checksum, with an ellipsis. */
export function short(text, n = 12) {
  if (!text) return dash;
  return text.length > n ? `${text.slice(0, n)}…` : text;
}

export { dash };
