// The manifest format, as a JSON Schema the core validates every plugin against.
import type { JsonObject } from '../protocol/envelope.js';

export type RiskLevel = 'low' | 'high';

export interface ToolDeclaration {
  name: string;
  description: string;
  risk_level: RiskLevel;
  /** The risk when called from a session a scheduled task started (default: risk_level). */
  task_run_risk_level?: RiskLevel;
  /**
   * Arguments that name a file in the agent's workspace: the core reads, checks (size,
   * type) and keeps the file, and the handler gets a FileRef instead of the path (files/).
   */
  file_arguments?: string[];
  /**
   * The call acts on state the agent can influence (an id naming a mutable thing, evidence
   * the host attaches): before a person is asked, the plugin's describeCall says what it is,
   * the prompt shows it, and an approval holds only while it stays the same.
   */
  describe?: boolean;
  /**
   * A high-risk tool whose call is low risk when every address it names is one the person
   * listed in the plugin's configuration (mail to people on the group's allow-list):
   * untrusted-input.ts. Never in a session that external content entered, unless the
   * configuration at `untrusted_turns` says "allow_list".
   */
  low_risk_recipients?: RecipientRule;
  /** The tool's answer is external content (a mail someone sent): its session counts as having read untrusted input. */
  untrusted_output?: boolean;
  /**
   * The call has an effect outside the appliance, or destroys something (send, invite,
   * share, publish, delete): in a session that has read external content it waits for a
   * person whatever its risk, unless `confirmations.allow_after_external_content` names it.
   */
  external_effect?: boolean;
  /**
   * A channel plugin's tool whose success means what the agent wrote reached a person: a
   * turn that makes such a call has answered (no "no answer" notice; the group's kept
   * conversation holds it). `true`: any successful call (a chat's send tool); `{ to }`:
   * only when one of the addresses these arguments name sent a message the turn answers
   * (mail to someone else answers nobody). Unset: `send_*` tools count as `true`.
   */
  reply?: ReplyRule;
  arguments_schema: JsonObject;
}

export type ReplyRule = boolean | { to: string[] };

export interface RecipientRule {
  /** Argument names holding an address or an array of addresses. */
  arguments: string[];
  /** JSON pointer into the plugin's configuration to the allowed addresses; "{group}" is the caller's group. */
  config: string;
  /** JSON pointer to the setting that lets the list apply in sessions that read untrusted input ("allow_list"). */
  untrusted_turns?: string;
}

export interface Manifest {
  description: string;
  version: string;
  app_compat: string;
  author?: { name?: string; url?: string; email?: string };
  /**
   * What the plugin may do beyond its tools (plugin-powers.ts): `channels` lets it publish
   * message.inbound and answer confirmations for the chats its configuration maps;
   * `schedules` lets it publish task.*.
   */
  provides: { channels: string[]; schedules: boolean; hooks: string[]; tools: ToolDeclaration[] };
  subscribes: string[];
  config_schema?: JsonObject;
  /** A page of the plugin's own in the console (its handler's servePanel), under this menu title. */
  panel?: { title: string };
  /**
   * Where the plugin may connect (the egress proxy enforces it; none declared: nowhere).
   * `hosts`: "host" (any port) or "host:port"; "*.example.com" any host under it. `config_hosts`: JSON pointers
   * into the plugin's configuration whose values are URLs or "host[:port]" (a server the
   * person configures, such as a CalDAV or IMAP server).
   */
  network: { hosts: string[]; config_hosts: string[] };
}

/** memory_brief: the handler's getBrief; connection_check: its module's checkConnections export (the Checks page). */
export const HOOKS = ['memory_brief', 'connection_check'] as const;
export const TOOL_NAME_PATTERN = '^[a-z][a-z0-9_]{0,63}$';
export const PLUGIN_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

export const manifestSchema = {
  type: 'object',
  required: ['description', 'version', 'app_compat', 'provides'],
  additionalProperties: false,
  properties: {
    description: { type: 'string', minLength: 1, maxLength: 1024 },
    version: { type: 'string', pattern: '^\\d+\\.\\d+\\.\\d+' },
    app_compat: { type: 'string', minLength: 1 },
    author: {
      type: 'object',
      additionalProperties: false,
      properties: { name: { type: 'string' }, url: { type: 'string' }, email: { type: 'string' } },
    },
    provides: {
      type: 'object',
      required: ['tools'],
      additionalProperties: false,
      properties: {
        channels: { type: 'array', items: { type: 'string', pattern: '^[a-z0-9_-]{1,64}$' }, default: [] },
        schedules: { type: 'boolean', default: false },
        hooks: { type: 'array', items: { enum: [...HOOKS] }, uniqueItems: true, default: [] },
        tools: {
          type: 'array',
          items: {
            type: 'object',
            required: ['name', 'description', 'arguments_schema'],
            additionalProperties: false,
            properties: {
              name: { type: 'string', pattern: TOOL_NAME_PATTERN },
              description: { type: 'string', minLength: 1, maxLength: 1024 },
              risk_level: { enum: ['low', 'high'], default: 'low' },
              task_run_risk_level: { enum: ['low', 'high'] },
              file_arguments: { type: 'array', items: { type: 'string', pattern: TOOL_NAME_PATTERN }, uniqueItems: true, maxItems: 4 },
              describe: { type: 'boolean' },
              low_risk_recipients: {
                type: 'object',
                required: ['arguments', 'config'],
                additionalProperties: false,
                properties: {
                  arguments: { type: 'array', items: { type: 'string', pattern: TOOL_NAME_PATTERN }, minItems: 1, maxItems: 8, uniqueItems: true },
                  config: { type: 'string', pattern: '^(/([A-Za-z0-9_-]+|\\{group\\}))+$' },
                  untrusted_turns: { type: 'string', pattern: '^(/[A-Za-z0-9_-]+)+$' },
                },
              },
              untrusted_output: { type: 'boolean' },
              external_effect: { type: 'boolean' },
              reply: {
                anyOf: [
                  { type: 'boolean' },
                  {
                    type: 'object',
                    required: ['to'],
                    additionalProperties: false,
                    properties: { to: { type: 'array', items: { type: 'string', pattern: TOOL_NAME_PATTERN }, minItems: 1, maxItems: 8, uniqueItems: true } },
                  },
                ],
              },
              // Every tool takes a JSON object and rejects undeclared fields.
              arguments_schema: {
                type: 'object',
                required: ['type', 'additionalProperties'],
                properties: { type: { const: 'object' }, additionalProperties: { const: false } },
              },
            },
          },
        },
      },
    },
    subscribes: { type: 'array', items: { type: 'string', pattern: '^[a-z][a-z0-9_.]*$' }, default: [] },
    config_schema: { type: 'object' },
    panel: { type: 'object', required: ['title'], additionalProperties: false, properties: { title: { type: 'string', minLength: 1, maxLength: 40 } } },
    network: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        hosts: { type: 'array', items: { type: 'string', pattern: '^(\\*\\.)?[a-z0-9.-]{1,253}(:[0-9]{1,5})?$' }, uniqueItems: true, maxItems: 32, default: [] },
        config_hosts: { type: 'array', items: { type: 'string', pattern: '^(/[A-Za-z0-9_-]+)+$' }, uniqueItems: true, maxItems: 8, default: [] },
      },
    },
  },
} as const;
