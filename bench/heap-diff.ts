// What grew between two V8 heap snapshots (e.g. the soak's SOAK_HEAP_SNAPSHOTS): objects
// counted by constructor (other nodes by their type), with their own sizes, the biggest
// growth first. V8's snapshot format: a flat `nodes` array, `snapshot.meta.node_fields`
// per node, names as indexes into `strings`.
//
//   node dist/bench/heap-diff.js dist/soak/core-minute-5.heapsnapshot dist/soak/core-minute-15.heapsnapshot
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Count and self size per constructor (objects) or per node type (strings, code, closures...). */
function census(file: string): Map<string, { count: number; bytes: number }> {
  const heap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const fields = heap.snapshot.meta.node_fields;
  const types = heap.snapshot.meta.node_types[0];
  const [type, name, size] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const out = new Map<string, { count: number; bytes: number }>();
  for (let i = 0; i < heap.nodes.length; i += fields.length) {
    const kind = types[heap.nodes[i + type]];
    const key = kind === 'object' || kind === 'closure' ? `${heap.strings[heap.nodes[i + name]]}${kind === 'closure' ? '()' : ''}` : `(${kind})`;
    const entry = out.get(key) ?? { count: 0, bytes: 0 };
    entry.count++;
    entry.bytes += heap.nodes[i + size];
    out.set(key, entry);
  }
  return out;
}

const [before, after] = process.argv.slice(2).map(census);
if (!before || !after) throw new Error('usage: heap-diff <before.heapsnapshot> <after.heapsnapshot>');
const rows = [...after].map(([key, a]) => {
  const b = before.get(key) ?? { count: 0, bytes: 0 };
  return { key, count: a.count, countDelta: a.count - b.count, kbDelta: (a.bytes - b.bytes) / 1024 };
});
const total = (m: Map<string, { bytes: number }>): number => [...m.values()].reduce((s, e) => s + e.bytes, 0) / 2 ** 20;
process.stdout.write(`heap: ${total(before).toFixed(1)} → ${total(after).toFixed(1)} MB (self sizes)\n`);
process.stdout.write('   +count      count     +KB  constructor\n');
for (const r of rows.sort((x, y) => y.kbDelta - x.kbDelta).slice(0, Number(process.env.TOP ?? 30))) {
  process.stdout.write(`${String(r.countDelta).padStart(9)} ${String(r.count).padStart(10)} ${r.kbDelta.toFixed(0).padStart(7)}  ${r.key.slice(0, 80)}\n`);
}
