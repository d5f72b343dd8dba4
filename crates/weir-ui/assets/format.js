// The one formatter of the page for numbers, rates, sizes, durations and times: counts with
// thousands separators ("1,234,567"), rates as "898 rows/s", bytes with a binary unit,
// durations as "850 ms" / "12.3 s" / "4m 05s".

const dash = "—";
const missing = (n) => n === null || n === undefined || Number.isNaN(n);

const whole = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const tenths = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });

/** A count or any number: 1234567 -> "1,234,567"; below 10, one decimal ("2.5"). */
export function count(n) {
  if (missing(n)) return dash;
  return Math.abs(n) < 10 && !Number.isInteger(n) ? tenths.format(n) : whole.format(n);
}

/** A rate: 898 -> "898 rows/s" (another unit with `unit`). */
export function rate(n, unit = "rows") {
  return missing(n) ? dash : `${count(n)} ${unit}/s`;
}

/** Bytes with a binary unit: "512 B", "1.5 KiB", "3.2 MiB". */
export function bytes(n) {
  if (missing(n)) return dash;
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${whole.format(v)} B` : `${tenths.format(v)} ${units[i]}`;
}

/** Milliseconds as "850 ms", "12.3 s", "4m 05s", "2h 03m", "3d 04h". */
export function duration(ms) {
  if (missing(ms)) return dash;
  const abs = Math.abs(ms);
  const sign = ms < 0 ? "-" : "";
  if (abs < 1000) return `${sign}${Math.round(abs)} ms`;
  if (abs < 60_000) return `${sign}${(abs / 1000).toFixed(1)} s`;
  const s = Math.floor(abs / 1000);
  const p = (n) => String(n).padStart(2, "0");
  if (s < 3600) return `${sign}${Math.floor(s / 60)}m ${p(s % 60)}s`;
  if (s < 172_800) return `${sign}${Math.floor(s / 3600)}h ${p(Math.floor(s / 60) % 60)}m`;
  return `${sign}${Math.floor(s / 86_400)}d ${p(Math.floor(s / 3600) % 24)}h`;
}

/** A share (0..1) as a percentage with no decimals. */
export function percent(fraction) {
  return missing(fraction) ? dash : `${Math.round(fraction * 100)}%`;
}

const pad = (n, w = 2) => String(n).padStart(w, "0");

/** An RFC 3339 string or Unix ms as local "YYYY-MM-DD HH:MM:SS". */
export function time(value) {
  if (value === null || value === undefined) return dash;
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** Unix ms as local "HH:MM:SS". */
export function clock(ms) {
  if (missing(ms)) return dash;
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/**
 * An event time (a watermark, Unix ms) as "YYYY-MM-DD HH:MM:SS.mmm UTC": event times are the
 * data's, not the reader's clock.
 */
export function eventTime(ms) {
  if (missing(ms)) return dash;
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return String(ms);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}.` +
    `${pad(d.getUTCMilliseconds(), 3)} UTC`;
}

/** "in 12.0 s" / "3.0 s ago" relative to now. */
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
