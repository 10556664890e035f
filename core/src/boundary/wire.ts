// Parses the minimal wire message {topic, correlation, arguments} that crosses the trust
// boundary. Everything else in the frame is ignored: identity never comes from here.
import { isUtf8 } from 'node:buffer';
import { pipelineError, type ErrorPayload } from '../protocol/errors.js';
import type { JsonObject } from '../protocol/envelope.js';

export const MAX_MESSAGE_BYTES = 1024 * 1024;
const MAX_TOPIC_LENGTH = 256;
const CORRELATION_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

export interface WireMessage {
  topic: string;
  correlation: string;
  arguments: JsonObject;
}

export type WireParse =
  | { ok: true; message: WireMessage }
  | { ok: false; correlation: string | null; topic: string; error: ErrorPayload };

function reject(reason: string, field: string, correlation: string | null = null, topic = ''): WireParse {
  return { ok: false, correlation, topic, error: pipelineError('VALIDATION_FAILED', reason, false, { stage: 1, field }) };
}

function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function parseWire(frame: Buffer): WireParse {
  if (frame.length > MAX_MESSAGE_BYTES) return reject(`Request exceeds ${MAX_MESSAGE_BYTES} bytes`, 'arguments');
  if (!isUtf8(frame)) return reject('Request is not valid UTF-8', 'message');
  let parsed: unknown;
  try {
    parsed = JSON.parse(frame.toString('utf8'));
  } catch {
    return reject('Request is not valid JSON', 'message');
  }
  if (!isPlainObject(parsed)) return reject('Request must be a JSON object', 'message');

  const correlation =
    typeof parsed.correlation === 'string' && CORRELATION_PATTERN.test(parsed.correlation) ? parsed.correlation : null;
  if (correlation === null) return reject('correlation must be a string of 1-128 [A-Za-z0-9._:-]', 'correlation');
  const topic = parsed.topic;
  if (typeof topic !== 'string' || topic.length === 0 || topic.length > MAX_TOPIC_LENGTH) {
    return reject(`topic must be a non-empty string of at most ${MAX_TOPIC_LENGTH} characters`, 'topic', correlation);
  }
  const args = parsed.arguments === undefined ? {} : parsed.arguments;
  if (!isPlainObject(args)) return reject('arguments must be a JSON object', 'arguments', correlation, topic);
  return { ok: true, message: { topic, correlation, arguments: args } };
}
