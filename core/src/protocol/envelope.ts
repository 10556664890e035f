import { randomUUID } from 'node:crypto';
import type { ErrorPayload } from './errors.js';

export const PROTOCOL_VERSION = 1;

export type JsonObject = { [key: string]: unknown };

interface EnvelopeBase {
  id: string;
  version: number;
  topic: string;
  source: string;
  timestamp: string;
}

export interface RequestEnvelope extends EnvelopeBase {
  type: 'request';
  group: string;
  correlation: string;
  payload: { arguments: JsonObject };
  /**
   * The calling session has read external content (DESIGN 16): what the call stores (a
   * memory, a task) keeps that label. Set by the core from its session table, never the agent.
   */
  external_content?: true;
}

export interface EventEnvelope extends EnvelopeBase {
  type: 'event';
  /** null for system events (plugin.ready, plugin.stopping) that concern no group. */
  group: string | null;
  correlation: string | null;
  payload: JsonObject;
}

export interface ResponseEnvelope extends EnvelopeBase {
  type: 'response';
  group: string;
  correlation: string | null;
  payload: { result: unknown; error: ErrorPayload | null };
}

export function newId(): string {
  return randomUUID();
}

let lastMs = -1;
let lastIso = '';

/** ISO time, formatted once per millisecond: a request stamps several things in one. */
export function now(): string {
  const ms = Date.now();
  if (ms !== lastMs) {
    lastMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

export function eventEnvelope(topic: string, source: string, group: string | null, payload: JsonObject): EventEnvelope {
  return { id: newId(), version: PROTOCOL_VERSION, type: 'event', topic, source, correlation: null, timestamp: now(), group, payload };
}

export const TOOL_TOPIC_PREFIX = 'tool.invoke.';
