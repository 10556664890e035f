// What the model API last said about the owner's credential, as the LLM proxy sees it.
// A refusal the person must fix (a wrong key, no credit, a model it does not offer) is
// put in their words: the turn that met it ends with that sentence on the channel that
// asked, and the console's Overview shows it until a request succeeds.

export type ModelProblemKind = 'key_refused' | 'not_permitted' | 'no_credit' | 'unknown_model';

export interface ModelProblem {
  kind: ModelProblemKind;
  /** For the person: what happened and how to fix it. */
  message: string;
  /** The upstream's HTTP status and its own words (truncated). */
  status: number;
  upstream: string;
  since: string;
}

export interface ModelHealthReport {
  ok: boolean;
  problem: ModelProblem | null;
  /** When a model request last succeeded (ISO), if one has since the start. */
  last_ok: string | null;
}

/** The statuses whose body is read to tell a refusal from an ordinary error. */
export const REFUSAL_STATUSES = new Set([400, 401, 403, 404]);

/** A refusal the person has to fix, from the upstream's status and error body; null for anything else. */
export function classifyRefusal(status: number, body: string, credentialVar: string, model: string): Omit<ModelProblem, 'since'> | null {
  let type = '';
  let upstream = '';
  try {
    const parsed = JSON.parse(body) as { error?: { type?: unknown; message?: unknown } };
    type = typeof parsed.error?.type === 'string' ? parsed.error.type : '';
    upstream = typeof parsed.error?.message === 'string' ? parsed.error.message.slice(0, 300) : '';
  } catch {
    upstream = body.slice(0, 300);
  }
  const fix = 'fix it and run `docker compose up -d`';
  if (status === 401) return { kind: 'key_refused', status, upstream, message: `the model API refused the key in .env: ${credentialVar}; ${fix}` };
  if (status === 403) return { kind: 'not_permitted', status, upstream, message: `the model API refused the key in .env (${credentialVar}): it is not allowed to do this; ${fix}` };
  if (status === 400 && /credit balance/i.test(upstream)) {
    return { kind: 'no_credit', status, upstream, message: `the model API says the account of the key in .env (${credentialVar}) has no credit left; add credit (Plans & Billing), then write again` };
  }
  if (status === 404 && type === 'not_found_error' && /model/i.test(upstream)) {
    return { kind: 'unknown_model', status, upstream, message: `the model API does not offer the model "${model}"; choose one it offers in carapace.json (llm.models) and Claude Code's model setting` };
  }
  return null;
}

export class ModelHealth {
  private problem: ModelProblem | null = null;
  private lastOk: string | null = null;

  /** Records a refusal (since the first of its kind in a row). */
  refused(problem: Omit<ModelProblem, 'since'>): ModelProblem {
    const since = this.problem?.kind === problem.kind ? this.problem.since : new Date().toISOString();
    return (this.problem = { ...problem, since });
  }

  succeeded(): void {
    this.problem = null;
    this.lastOk = new Date().toISOString();
  }

  report(): ModelHealthReport {
    return { ok: this.problem === null, problem: this.problem, last_ok: this.lastOk };
  }
}
