// Summarises a V8 .cpuprofile (from `node --cpu-prof`): top functions by self time,
// the same by inclusive time, and self time grouped by where the code lives.
//
//   node dist/bench/profile-summary.js <file.cpuprofile> [top=25] [--callers <name>]
import { readFileSync } from 'node:fs';
import { relative, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

process.stdout.on('error', () => process.exit(0)); // e.g. piped into head

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const file = process.argv[2];
const top = /^\d+$/.test(process.argv[3] ?? '') ? Number(process.argv[3]) : 25;
if (!file) {
  process.stderr.write('usage: profile-summary <file.cpuprofile> [top]\n');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;

const byId = new Map<number, ProfileNode>();
const parent = new Map<number, number>();
for (const n of profile.nodes) byId.set(n.id, n);
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

function where(cf: CallFrame): string {
  let url = cf.url.replace(/^file:\/\//, '');
  if (url.startsWith('/')) url = relative(ROOT, url);
  return url ? `${url}:${cf.lineNumber + 1}` : '';
}
const key = (cf: CallFrame): string => `${cf.functionName || '(anonymous)'}  ${where(cf)}`.trim();

function area(cf: CallFrame): string {
  const name = cf.functionName;
  if (!cf.url) return name.startsWith('(') ? name : `(native) ${name || '(anonymous)'}`;
  const url = cf.url.replace(/^file:\/\//, '');
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return `node_modules/${nm[1]}`;
  if (url.startsWith('node:')) return url.split('/').slice(0, 2).join('/');
  const rel = url.startsWith('/') ? relative(ROOT, url) : url;
  return rel.replace(/^dist\//, '');
}

// Sample i's cost is the gap to the next sample (the last one gets the profile's end).
const self = new Map<string, number>();
const incl = new Map<string, number>();
const areas = new Map<string, number>();
let total = 0;
let idle = 0;
const { samples, timeDeltas } = profile;
for (let i = 0; i < samples.length; i++) {
  const dt = i + 1 < timeDeltas.length ? timeDeltas[i + 1] : 0;
  if (dt <= 0) continue;
  total += dt;
  const node = byId.get(samples[i]);
  if (!node) continue;
  const cf = node.callFrame;
  if (cf.functionName === '(idle)') idle += dt;
  self.set(key(cf), (self.get(key(cf)) ?? 0) + dt);
  areas.set(area(cf), (areas.get(area(cf)) ?? 0) + dt);
  const seen = new Set<string>();
  for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
    const k = key(byId.get(id)!.callFrame);
    if (seen.has(k)) continue;
    seen.add(k);
    incl.set(k, (incl.get(k) ?? 0) + dt);
  }
}

const busy = total - idle;
const ms = (us: number): string => (us / 1000).toFixed(1).padStart(9);
const pct = (us: number, of: number): string => `${((100 * us) / of).toFixed(1).padStart(5)}%`;
const list = (m: Map<string, number>, n: number, skipRoot = false): [string, number][] =>
  [...m.entries()].filter(([k]) => !(skipRoot && (k === '(root)' || k.startsWith('(program)')))).sort((a, b) => b[1] - a[1]).slice(0, n);

process.stdout.write(`${file}\n`);
process.stdout.write(`profiled ${(total / 1e6).toFixed(2)} s, idle ${(idle / 1e6).toFixed(2)} s, busy ${(busy / 1e6).toFixed(2)} s (percentages are of busy time)\n\n`);
process.stdout.write(`Top ${top} by self time\n        ms   busy  function\n`);
for (const [k, v] of list(self, top + 1).filter(([k]) => k !== '(idle)').slice(0, top)) process.stdout.write(`${ms(v)} ${pct(v, busy)}  ${k}\n`);
process.stdout.write(`\nSelf time by area\n`);
for (const [k, v] of list(areas, 30).filter(([k]) => k !== '(idle)')) process.stdout.write(`${ms(v)} ${pct(v, busy)}  ${k}\n`);
process.stdout.write(`\nTop ${top} by inclusive time (first-party and libraries)\n`);
for (const [k, v] of list(incl, 400, true)
  .filter(([k]) => k !== '(idle)' && !k.startsWith('(root)') && !k.startsWith('(anonymous)  node:') && !/^(processTicksAndRejections|runMicrotasks|listOnTimeout|processTimers)\b/.test(k))
  .slice(0, top))
  process.stdout.write(`${ms(v)} ${pct(v, busy)}  ${k}\n`);

// --callers <substring> (or =<exact key>): where the self time of matching functions is spent from
// (immediate caller chain, 3 frames), to see what a native frame or a hot helper serves.
const callersIdx = process.argv.indexOf('--callers');
if (callersIdx > 0 && process.argv[callersIdx + 1]) {
  const needle = process.argv[callersIdx + 1];
  const matches = needle.startsWith('=') ? (k: string) => k === needle.slice(1) : (k: string) => k.includes(needle);
  const chains = new Map<string, number>();
  let sum = 0;
  for (let i = 0; i < samples.length; i++) {
    const dt = i + 1 < timeDeltas.length ? timeDeltas[i + 1] : 0;
    const node = byId.get(samples[i]);
    if (!node || dt <= 0 || !matches(key(node.callFrame))) continue;
    const chain: string[] = [];
    for (let id = parent.get(node.id); id !== undefined && chain.length < 3; id = parent.get(id)) chain.push(key(byId.get(id)!.callFrame));
    const k = `${key(node.callFrame)}  ⟵  ${chain.join('  ⟵  ')}`;
    chains.set(k, (chains.get(k) ?? 0) + dt);
    sum += dt;
  }
  process.stdout.write(`\nSelf time of "${needle}" (${(sum / 1000).toFixed(1)} ms) by caller chain\n`);
  for (const [k, v] of list(chains, 15)) process.stdout.write(`${ms(v)} ${pct(v, sum)}  ${k}\n`);
}
