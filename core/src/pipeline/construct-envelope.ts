// Stage 1: the envelope is built from the core's session record. The wire message
// contributes topic, correlation and arguments only.
import type { Session } from '../boundary/session-table.js';
import type { WireMessage } from '../boundary/wire.js';
import { newId, now, PROTOCOL_VERSION, type RequestEnvelope } from '../protocol/envelope.js';

export function constructEnvelope(wire: WireMessage, session: Session): RequestEnvelope {
  return {
    id: newId(),
    version: PROTOCOL_VERSION,
    type: 'request',
    topic: wire.topic,
    source: session.id,
    correlation: wire.correlation,
    timestamp: now(),
    group: session.group,
    payload: { arguments: wire.arguments },
    ...(session.untrustedInput ? { external_content: true as const } : {}),
  };
}
