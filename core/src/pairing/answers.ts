// A person's answer to a pairing request over HTTP, the same for the admin API and the console.
import type { FastifyReply } from 'fastify';
import type { Core } from '../core.js';

/** `{group, create?}` → the chat is mapped, or a coded error. */
export function answerPairing(core: Core, code: string, body: { group?: unknown; create?: unknown } | null, by: string, reply: FastifyReply): FastifyReply | object {
  const { group, create } = body ?? {};
  if (typeof group !== 'string' || (create !== undefined && typeof create !== 'boolean')) return reply.code(400).send({ code: 'INVALID_INPUT', message: 'needs {"group": string, "create"?: boolean}' });
  const answer = core.pairing.approve(code, group, create === true, by);
  if (answer.ok) return { code: answer.request.code, plugin: answer.request.plugin, chat: answer.request.chat, group: answer.group };
  const status = { NOT_FOUND: 404, CONFLICT: 409, INVALID_INPUT: 400, CONFIG_INVALID: 409, UNAVAILABLE: 503 }[answer.code] ?? 500;
  return reply.code(status).send({ code: answer.code, message: answer.message });
}

export function refusePairing(core: Core, code: string, by: string, reply: FastifyReply): FastifyReply | object {
  const refused = core.pairing.refuse(code, by);
  return refused ? { code: refused.code, refused: true } : reply.code(404).send({ code: 'NOT_FOUND', message: 'no such pairing request' });
}

