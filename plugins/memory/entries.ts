// What one memory entry is, and the bounds and text rules every store and tool shares
// (split from store.ts, which holds the database).
import type { MemoryBriefEntry } from '#sdk';

export const ENTRY_TYPES = ['preference', 'fact', 'instruction', 'context', 'correction'] as const;
export type EntryType = (typeof ENTRY_TYPES)[number];

/** Behavioral entries change how the agent acts; the flag is derived here, never supplied. */
export const BEHAVIORAL: Readonly<Record<EntryType, boolean>> = {
  preference: true,
  fact: false,
  instruction: true,
  context: false,
  correction: true,
};

export const MAX_CONTENT = 2000;
export const MAX_TAGS = 10;
export const MAX_TAG_LENGTH = 50;
export const MAX_SEARCH_LIMIT = 100;
/** The bm25 work budget of one search (bm25 costs about 2 µs per entry on a small machine). */
export const RANK_CANDIDATES = 300;
export const DAY_MS = 86_400_000;

/** Write-time metadata, taken from the request envelope by the handler. */
export interface Provenance {
  session_id: string;
  group: string;
  timestamp: string;
  correlation: string | null;
  /** The storing session had read external content (the core's label on its request). */
  external: boolean;
}

export interface NewEntry {
  type: EntryType;
  content: string;
  tags: string[];
  supersedes: string | null;
  provenance: Provenance;
}

export interface StoredEntry {
  id: string;
  type: EntryType;
  content: string;
  tags: string[];
  behavioral: boolean;
  supersedes: string | null;
  provenance: Provenance;
}

export interface SearchOptions {
  query?: string;
  tags?: string[];
  type?: EntryType;
  includeSuperseded?: boolean;
  limit?: number;
}

export interface SearchResult {
  id: string;
  type: string;
  content: string;
  behavioral: boolean;
  tags: string[];
  created_at: string;
  /** 0–1: bm25 relative to the best match of this search; 1 for searches without text. */
  relevance_score: number;
  /** Present only with include_superseded: the entry that replaced this one, or null. */
  superseded_by?: string | null;
  provenance: Provenance;
}

/** The SDK's brief entry, plus provenance for the memory_brief tool. */
export interface BriefEntry extends MemoryBriefEntry {
  provenance?: { session_id: string; group: string; timestamp: string };
}

export interface Brief {
  entries: BriefEntry[];
  generated_at: string;
  entry_count: number;
  brief_count: number;
}

export interface BriefLimits {
  maxEntries: number;
  maxChars: number;
  includeProvenance?: boolean;
  now?: number;
}

/** A refusal the agent can act on; the message is written for the agent's eyes. */
export class MemoryInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MemoryInputError';
  }
}

const LINE_BREAKS = /[\r\n\u000b\u000c\u0085\u2028\u2029]+/g;

/** Single-line content for the brief: a stored entry can never break the brief's structure. */
export function singleLine(text: string): string {
  return text.replace(LINE_BREAKS, ' ').trim();
}

/** Tags as stored and matched: NFKC, trimmed, lower-case, distinct, non-empty. */
export function normalizeTags(tags: readonly string[]): string[] {
  const out = new Set<string>();
  for (const tag of tags) {
    const t = singleLine(String(tag).normalize('NFKC')).toLowerCase();
    if (t) out.add(t);
  }
  return [...out];
}

/** An ISO 8601 timestamp in the one form the database orders by; now when unparsable. */
export function isoTimestamp(value: string | undefined, now = Date.now()): string {
  const ms = value === undefined ? NaN : Date.parse(value);
  return new Date(Number.isFinite(ms) ? ms : now).toISOString();
}

/** An empty brief, for a group that has never stored anything. */
export function emptyBrief(now = Date.now()): Brief {
  return { entries: [], generated_at: new Date(now).toISOString(), entry_count: 0, brief_count: 0 };
}
