// Summary statistics of latency samples (ms), shared by every benchmark.
export interface Stats {
  n: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
}

export const r3 = (x: number): number => Math.round(x * 1000) / 1000;

/** Nearest-rank percentiles, rounded to microseconds. */
export function stats(samples: number[]): Stats {
  const s = Float64Array.from(samples).sort();
  const n = s.length;
  if (n === 0) return { n: 0, p50: NaN, p90: NaN, p95: NaN, p99: NaN, mean: NaN, min: NaN, max: NaN };
  const at = (p: number): number => r3(s[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))]);
  let sum = 0;
  for (const v of s) sum += v;
  return { n, p50: at(0.5), p90: at(0.9), p95: at(0.95), p99: at(0.99), mean: r3(sum / n), min: r3(s[0]), max: r3(s[n - 1]) };
}

/** Least-squares slope of y over x. */
export function slope(points: [number, number][]): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const num = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0);
  const den = points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  return num / den;
}
