// A tool whose call reaches outside the appliance (send, invite, share, publish, delete)
// waits for a person in a session that has read external content, whatever its usual risk,
// unless the person's configuration names it (DESIGN 16); commands come only from a
// person's own chat message.
import { describe, expect, it } from '@jest/globals';
import { riskOf } from '../../src/pipeline/confirm.js';
import { carriesUntrustedInput, isPersonsChatMessage } from '../../src/pipeline/untrusted-input.js';
import { eventEnvelope } from '../../src/protocol/envelope.js';

const createEvent = { name: 'create_event', risk_level: 'low' as const, external_effect: true };
const listEvents = { name: 'list_events', risk_level: 'low' as const };
const sendEmail = {
  name: 'send_email',
  risk_level: 'high' as const,
  external_effect: true,
  low_risk_recipients: { arguments: ['to'], config: '/mailboxes/{group}/recipients', untrusted_turns: '/untrusted_turns' },
};
const clean = { group: 'family' };
const labelled = { group: 'family', untrustedInput: true };

describe('riskOf: external effects', () => {
  it('a low-risk tool with an external effect asks in a labelled session, and only there', () => {
    expect(riskOf(createEvent, clean)).toBe('low');
    expect(riskOf(createEvent, labelled)).toBe('high');
    expect(riskOf(listEvents, labelled)).toBe('low');
  });

  it("the person's allow_after_external_content lets a named tool through, no other", () => {
    expect(riskOf(createEvent, labelled, {}, undefined, new Set(['create_event']))).toBe('low');
    expect(riskOf(createEvent, labelled, {}, undefined, new Set(['update_event']))).toBe('high');
  });

  it('mail to a listed recipient asks nobody in a clean session; in a labelled one, only when the plugin says allow_list', () => {
    const args = { to: ['alice@example.org'] };
    const config = { mailboxes: { family: { recipients: ['alice@example.org'] } } };
    expect(riskOf(sendEmail, clean, args, config)).toBe('low');
    expect(riskOf(sendEmail, labelled, args, config)).toBe('high');
    expect(riskOf(sendEmail, labelled, args, { ...config, untrusted_turns: 'allow_list' })).toBe('low');
  });
});

describe('what counts as external, and as a command', () => {
  const inbound = (payload: Record<string, unknown>) => eventEnvelope('message.inbound', 'x', 'family', payload);
  it('a mail and a task a labelled session scheduled carry external content; a chat message and a clean task do not', () => {
    expect(carriesUntrustedInput(inbound({ content_type: 'email', body: 'hi' }))).toBe(true);
    expect(carriesUntrustedInput(eventEnvelope('task.triggered', 'tasks', 'family', { prompt: 'p', external: true }))).toBe(true);
    expect(carriesUntrustedInput(eventEnvelope('task.triggered', 'tasks', 'family', { prompt: 'p' }))).toBe(false);
    expect(carriesUntrustedInput(inbound({ content_type: 'text', body: 'hi' }))).toBe(false);
  });
  it("only a person's own chat message can hold a command", () => {
    expect(isPersonsChatMessage(inbound({ content_type: 'text', body: '/forget' }))).toBe(true);
    expect(isPersonsChatMessage(inbound({ content_type: 'email', body: '/forget' }))).toBe(false);
    expect(isPersonsChatMessage(inbound({ body: '/forget' }))).toBe(false);
    expect(isPersonsChatMessage(eventEnvelope('task.triggered', 'tasks', 'family', { prompt: '/forget' }))).toBe(false);
  });
});
