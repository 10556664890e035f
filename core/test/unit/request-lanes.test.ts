// A request lane whose process never reads it: the core stops writing once 16 MiB wait
// unread, closes the lane and says so, and the requests sent on it end "unknown". Real
// unix sockets; the other end is a raw connection with the host's hello, as a hijacked
// plugin process would hold it.
import { afterEach, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RequestLanes } from '../../src/plugins/request-lanes.js';
import type { RequestEnvelope } from '../../src/protocol/envelope.js';
import { until } from '../harness.js';

const dir = mkdtempSync(join(tmpdir(), 'lanes-'));
let lanes: RequestLanes | null = null;
let peer: Socket | null = null;

afterEach(async () => {
  peer?.destroy();
  await lanes?.close();
  rmSync(dir, { recursive: true, force: true });
});

it('a lane left unread past its bound is closed, said once, and its requests end unknown', async () => {
  const faults: string[] = [];
  const lost: string[] = [];
  lanes = new RequestLanes({ response: () => undefined, lost: (_plugin, rids) => lost.push(...rids), fault: (_plugin, detail) => faults.push(detail) });
  const path = join(dir, 'lanes.sock');
  await lanes.open(path);
  peer = connect(path);
  peer.write(`${JSON.stringify({ t: 'lane', plugin: 'deaf', token: lanes.token })}\n`);
  peer.pause(); // and never reads
  await until(() => lanes!.send('deaf', { t: 'cancel', rid: 'probe' }), 5000);
  const envelope = { topic: 'tool.invoke.x', payload: { arguments: { text: 'x'.repeat(1024 * 1024) } } } as unknown as RequestEnvelope;
  const sent: string[] = [];
  for (let i = 0; i < 100 && lanes.send('deaf', { t: 'request', rid: `r${i}`, envelope }); i++) {
    sent.push(`r${i}`);
    await new Promise((r) => setImmediate(r));
  }
  expect(sent.length).toBeGreaterThan(10);
  expect(sent.length).toBeLessThan(40);
  expect(faults).toEqual([expect.stringContaining('more than 16777216 bytes of its request lane unread')]);
  expect(lost.sort()).toEqual(sent.sort());
  // Closed: nothing more goes on it.
  expect(lanes.send('deaf', { t: 'request', rid: 'after', envelope })).toBe(false);
});
