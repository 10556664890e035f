// Why a connection to a plugin's server failed, as the relay (and the egress service) say it
// to the plugin: the step (the name did not resolve, or the connection was refused or timed
// out) in a header, and the reason in a line of text. A plugin's connection check shows it
// to the person (sdk/connection-check.ts); nothing in it is secret (a host, a port, a code).

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_FAIL', 'ENODATA']);

export interface ConnectFailure {
  step: 'dns' | 'connect';
  /** The reason, for a person: e.g. "the name imap.example.org does not resolve (ENOTFOUND)". */
  words: string;
}

/** The header the step travels in, on a refused CONNECT. */
export const STEP_HEADER = 'x-carapace-step';
/** The header the egress service names the error's code in, for the relay. */
export const CODE_HEADER = 'x-carapace-error';

export function connectFailure(target: string, code: string | undefined, message?: string): ConnectFailure {
  const host = target.replace(/:\d+$/, '');
  if (code && DNS_CODES.has(code)) return { step: 'dns', words: `the name ${host} does not resolve (${code})` };
  if (code === 'ECONNREFUSED') return { step: 'connect', words: `${target} refused the connection (ECONNREFUSED): nothing listens on that port` };
  if (code === 'ETIMEDOUT' || /timed out/.test(message ?? '')) return { step: 'connect', words: `${target} did not answer in time (${code ?? 'timeout'})` };
  return { step: 'connect', words: `could not connect to ${target} (${code ?? message?.split('\n', 1)[0].slice(0, 200) ?? 'unknown error'})` };
}

/** A refused CONNECT's answer, with the step and the words. */
export function refusalText(status: string, failure: ConnectFailure): string {
  return `HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\n${STEP_HEADER}: ${failure.step}\r\nconnection: close\r\n\r\n${failure.words}\n`;
}
