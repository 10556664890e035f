// Pairing requests: one per chat, bounded, expiring, and a refused chat left alone for a while.
import { describe, expect, it } from '@jest/globals';
import { PairingRequests } from '../../src/pairing/pairing-requests.js';

const limits = { maxPending: 3, ttlMs: 1000, refusedMs: 5000, maxRefused: 2 };

function clocked() {
  let now = 1_000_000;
  return { requests: new PairingRequests(limits, () => now), tick: (ms: number) => (now += ms) };
}

describe('PairingRequests', () => {
  it('gives a chat the same code while it waits, a new one after it expired', () => {
    const { requests, tick } = clocked();
    const first = requests.request('telegram', '1', { text: 'hi' })!;
    expect(first.fresh).toBe(true);
    expect(first.request.code).toMatch(/^[A-HJ-NP-Z2-9]{6}$/);
    expect(requests.request('telegram', '1', {})).toEqual({ request: first.request, fresh: false });
    tick(1001);
    expect(requests.list()).toHaveLength(0);
    expect(requests.get(first.request.code)).toBeNull();
    expect(requests.request('telegram', '1', {})!.fresh).toBe(true);
  });

  it('keeps at most maxPending, dropping the oldest; codes are case-insensitive', () => {
    const { requests } = clocked();
    const codes = ['1', '2', '3', '4'].map((chat) => requests.request('telegram', chat, {})!.request.code);
    expect(requests.list().map((r) => r.chat)).toEqual(['2', '3', '4']);
    expect(requests.get(codes[0])).toBeNull();
    expect(requests.get(codes[3].toLowerCase())?.chat).toBe('4');
  });

  it('a refused chat gets no request until refusedMs has passed; the refused list is bounded', () => {
    const { requests, tick } = clocked();
    const code = requests.request('telegram', '9', {})!.request.code;
    expect(requests.refuse(code)?.chat).toBe('9');
    expect(requests.refuse(code)).toBeNull();
    expect(requests.request('telegram', '9', {})).toBeNull();
    expect(requests.request('other-channel', '9', {})).not.toBeNull();
    tick(5001);
    expect(requests.request('telegram', '9', {})).not.toBeNull();
  });

  it('cuts what a channel says of a chat short', () => {
    const { requests } = clocked();
    const { request } = requests.request('telegram', '5', { name: 'n'.repeat(500), text: 't'.repeat(5000) })!;
    expect(request.name).toHaveLength(100);
    expect(request.text).toHaveLength(200);
  });
});
