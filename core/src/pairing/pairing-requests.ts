// Chats that want to talk to the agent, waiting for the owner. One request per (channel
// plugin, chat): asking again while it waits gives the same code. Bounded on every side:
// at most `maxPending` wait (the oldest is dropped), each for `ttlMs`, and a chat the owner
// refused is not asked about again for `refusedMs` (at most `maxRefused` remembered).
import { randomInt } from 'node:crypto';

export interface PairingRequest {
  code: string;
  /** The channel plugin it came through (e.g. telegram). */
  plugin: string;
  chat: string;
  /** What the channel says the chat is called, and the start of its first message. */
  name: string | null;
  text: string | null;
  requested_at: string;
  expires_at: string;
}

export interface PairingLimits {
  maxPending: number;
  ttlMs: number;
  refusedMs: number;
  maxRefused: number;
}

export const PAIRING_LIMITS: PairingLimits = { maxPending: 50, ttlMs: 3_600_000, refusedMs: 7 * 86_400_000, maxRefused: 1000 };
// No 0/O, 1/I/L: a code is read off one screen and typed on another.
const ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';
const CODE_LENGTH = 6;

export class PairingRequests {
  private readonly pending = new Map<string, PairingRequest>();
  private readonly refused = new Map<string, number>();

  constructor(
    private readonly limits: PairingLimits = PAIRING_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  /** The request for this chat (new, or the one waiting); null if the owner refused the chat lately. */
  request(plugin: string, chat: string, details: { name?: string; text?: string }): { request: PairingRequest; fresh: boolean } | null {
    this.prune();
    const key = `${plugin} ${chat}`;
    if (this.refused.has(key)) return null;
    const waiting = [...this.pending.values()].find((r) => r.plugin === plugin && r.chat === chat);
    if (waiting) return { request: waiting, fresh: false };
    if (this.pending.size >= this.limits.maxPending) this.pending.delete(this.pending.keys().next().value as string);
    const now = this.now();
    const request: PairingRequest = {
      code: this.newCode(),
      plugin,
      chat,
      name: details.name?.slice(0, 100) || null,
      text: details.text?.slice(0, 200) || null,
      requested_at: new Date(now).toISOString(),
      expires_at: new Date(now + this.limits.ttlMs).toISOString(),
    };
    this.pending.set(request.code, request);
    return { request, fresh: true };
  }

  list(): PairingRequest[] {
    this.prune();
    return [...this.pending.values()];
  }

  get(code: string): PairingRequest | null {
    this.prune();
    return this.pending.get(code.toUpperCase()) ?? null;
  }

  /** Approved: it no longer waits. */
  remove(code: string): void {
    this.pending.delete(code.toUpperCase());
  }

  /** Refused: it no longer waits, and the chat is not asked about again for a while. */
  refuse(code: string): PairingRequest | null {
    const request = this.get(code);
    if (!request) return null;
    this.pending.delete(request.code);
    if (this.refused.size >= this.limits.maxRefused) this.refused.delete(this.refused.keys().next().value as string);
    this.refused.set(`${request.plugin} ${request.chat}`, this.now() + this.limits.refusedMs);
    return request;
  }

  private prune(): void {
    const now = this.now();
    for (const [code, r] of this.pending) if (Date.parse(r.expires_at) <= now) this.pending.delete(code);
    for (const [key, until] of this.refused) if (until <= now) this.refused.delete(key);
  }

  private newCode(): string {
    for (;;) {
      const code = Array.from({ length: CODE_LENGTH }, () => ALPHABET[randomInt(ALPHABET.length)]).join('');
      if (!this.pending.has(code)) return code;
    }
  }
}
