// Standing approvals: a person's "allow this tool, with exactly these arguments, in this
// group, for N hours". Only a person makes one (an answer to a prompt, the admin API, the
// CLI); nothing in an agent's reach can create, widen or extend one. Exact means the tool,
// the group and the canonical JSON of the validated arguments (key order aside, any
// difference asks again), and for a tool whose plugin describes what a call refers to
// (call-state.ts), that state as it was when granted: once it differs, a person is asked. Kept in a small JSON file so a restart does not forget a revoke
// or resurrect an expired one; a file that cannot be read is moved aside: nothing is
// approved that a person did not approve.
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import stringify from 'safe-stable-stringify';
import { writeAtomically } from '../state/atomic-write.js';
import { readVersionedJson } from '../state/versioned-json.js';
import type { StoreProblem } from '../state/sqlite-file.js';

/** The longest a standing approval may last: a week. */
export const MAX_HOURS = 168;
/** At most this many per group at once: a list a person can still read. */
export const MAX_PER_GROUP = 20;
/** A standing approval acts at most this often per hour (default 1): one grant is not a licence to repeat. */
export const DEFAULT_USES_PER_HOUR = 1;
export const MAX_USES_PER_HOUR = 60;
const HOUR_MS = 3600_000;

export interface StandingApproval {
  id: string;
  group: string;
  tool: string;
  arguments: Record<string, unknown>;
  created_by: string;
  created_at: string;
  expires_at: string;
  /** How many calls it may cover in any hour. */
  uses_per_hour: number;
  /** When it was used within the last hour (kept across restarts). */
  used_at: string[];
  /** What the call referred to when granted (its plugin's lines, escaped) and their hash; null for a tool that describes nothing. */
  state?: string[] | null;
  state_hash?: string | null;
}

export interface Grant {
  group: string;
  tool: string;
  arguments: Record<string, unknown>;
  hours: number;
  by: string;
  /** Default DEFAULT_USES_PER_HOUR. */
  uses_per_hour?: number;
  /** What the call referred to when the person granted it (call-state.ts). */
  state?: { lines: string[] | null; hash: string | null };
}

export type GrantRefusal = { code: 'INVALID_INPUT' | 'LIMIT' | 'UNAVAILABLE'; message: string };

const canonical = (value: unknown): string => stringify(value) ?? '';

export class StandingApprovals {
  private entries: StandingApproval[] = [];

  /**
   * `onExpired` hears of each approval that ran out (the core audits it); `now` is for tests.
   * With no file the list lives in memory.
   */
  constructor(
    private readonly file: string | null,
    onProblem: (problem: StoreProblem) => void = () => undefined,
    private readonly onExpired: (approval: StandingApproval) => void = () => undefined,
    private readonly now: () => number = Date.now,
  ) {
    if (!file) return;
    const saved = readVersionedJson(file, { migrations: [(json) => json], read: (json) => {
      const approvals = (json as { approvals?: unknown } | null)?.approvals;
      if (!Array.isArray(approvals)) throw new Error('no "approvals" array');
      // Approvals made before uses per hour existed: once an hour, the default.
      return approvals.filter(isApproval).map((a) => ({ ...a, uses_per_hour: Number.isInteger(a.uses_per_hour) ? a.uses_per_hour : DEFAULT_USES_PER_HOUR, used_at: Array.isArray(a.used_at) ? a.used_at.filter((t) => typeof t === 'string') : [] }));
    } });
    if (saved.kind === 'loaded') this.entries = saved.value;
    if (saved.kind === 'moved') onProblem({ file, movedTo: saved.movedAside, error: saved.error });
  }

  grant(input: Grant): StandingApproval | GrantRefusal {
    if (!Number.isFinite(input.hours) || input.hours <= 0 || input.hours > MAX_HOURS) {
      return { code: 'INVALID_INPUT', message: `hours must be more than 0 and at most ${MAX_HOURS}` };
    }
    const uses = input.uses_per_hour ?? DEFAULT_USES_PER_HOUR;
    if (!Number.isInteger(uses) || uses < 1 || uses > MAX_USES_PER_HOUR) {
      return { code: 'INVALID_INPUT', message: `uses_per_hour must be a whole number from 1 to ${MAX_USES_PER_HOUR}` };
    }
    if (this.list(input.group).length >= MAX_PER_GROUP) {
      return { code: 'LIMIT', message: `group "${input.group}" already has ${MAX_PER_GROUP} standing approvals; revoke some first` };
    }
    const created = this.now();
    const approval: StandingApproval = {
      id: randomUUID(),
      group: input.group,
      tool: input.tool,
      arguments: JSON.parse(canonical(input.arguments)) as Record<string, unknown>,
      created_by: input.by,
      created_at: new Date(created).toISOString(),
      expires_at: new Date(created + input.hours * HOUR_MS).toISOString(),
      uses_per_hour: uses,
      used_at: [],
      state: input.state?.lines ?? null,
      state_hash: input.state?.hash ?? null,
    };
    this.entries.push(approval);
    if (!this.save()) {
      this.entries.pop();
      return { code: 'UNAVAILABLE', message: 'the standing approval could not be saved on the host (disk full?); nothing was granted' };
    }
    return approval;
  }

  /** The ones in force (expired ones are dropped here, each reported once). */
  list(group?: string): StandingApproval[] {
    const now = this.now();
    const expired = this.entries.filter((a) => Date.parse(a.expires_at) <= now);
    if (expired.length > 0) {
      this.entries = this.entries.filter((a) => !expired.includes(a));
      this.save();
      for (const approval of expired) this.onExpired(approval);
    }
    const hourAgo = now - HOUR_MS;
    for (const a of this.entries) a.used_at = a.used_at.filter((t) => Date.parse(t) > hourAgo);
    return this.entries.filter((a) => group === undefined || a.group === group);
  }

  revoke(id: string): StandingApproval | null {
    const approval = this.list().find((a) => a.id === id) ?? null;
    if (approval) {
      this.entries = this.entries.filter((a) => a !== approval);
      this.save();
    }
    return approval;
  }

  /** The standing approval that covers exactly this call, if any (whether or not it has a use left). */
  match(group: string, tool: string, args: unknown): StandingApproval | null {
    const wanted = canonical(args);
    return this.list(group).find((a) => a.tool === tool && canonical(a.arguments) === wanted) ?? null;
  }

  /**
   * Takes one of the matching approval's uses for this hour: `used` when the call may run
   * without asking, `spent` when it has none left, `changed` when what the call refers to is
   * not what it was when granted (`stateHash`: call-state.ts; a person is asked for both),
   * null when none matches.
   */
  use(group: string, tool: string, args: unknown, stateHash: string | null = null): { used: StandingApproval } | { spent: StandingApproval } | { changed: StandingApproval } | null {
    const approval = this.match(group, tool, args);
    if (!approval) return null;
    if ((approval.state_hash ?? null) !== stateHash) return { changed: approval };
    if (approval.used_at.length >= approval.uses_per_hour) return { spent: approval };
    approval.used_at.push(new Date(this.now()).toISOString());
    this.save();
    return { used: approval };
  }

  /**
   * Temp file + rename: a crash leaves the old list or the new one, never half of one.
   * False when it could not be written (a revoke or expiry still holds in memory).
   */
  private save(): boolean {
    if (!this.file) return true;
    try {
      mkdirSync(dirname(this.file), { recursive: true });
      writeAtomically(this.file, JSON.stringify({ version: 1, approvals: this.entries }, null, 1), 0o600);
      return true;
    } catch {
      return false;
    }
  }
}

function isApproval(value: unknown): value is StandingApproval {
  const a = value as Partial<StandingApproval> | null;
  return (
    !!a && typeof a.id === 'string' && typeof a.group === 'string' && typeof a.tool === 'string' && typeof a.created_by === 'string' &&
    typeof a.arguments === 'object' && a.arguments !== null && !Array.isArray(a.arguments) &&
    typeof a.created_at === 'string' && Number.isFinite(Date.parse(a.expires_at ?? ''))
  );
}
