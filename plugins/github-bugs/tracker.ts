// A minimal issue-tracker client for GitHub and Gitea/Forgejo (same JSON for what we use,
// different paths and auth headers). No error made here ever carries a URL, a header or
// the token: only the operation, the HTTP status and the tracker's own (scrubbed) message.

export type Flavor = 'github' | 'gitea';

/** The tracker answered with an error status. */
export class TrackerError extends Error {
  constructor(
    readonly operation: string,
    readonly status: number,
    /** The tracker's "message", scrubbed and shortened; may be empty. */
    readonly detail: string,
    /** Seconds to wait, from Retry-After or an exhausted rate limit. */
    readonly retryAfter: number | null,
  ) {
    super(`${operation} failed (HTTP ${status})${detail ? `: ${detail}` : ''}`);
    this.name = 'TrackerError';
  }
}

/** The tracker could not be reached, or did not answer in time. `code` is e.g. ECONNREFUSED. */
export class TrackerUnreachable extends Error {
  constructor(
    readonly operation: string,
    readonly code: string,
  ) {
    super(`${operation}: issue tracker unreachable (${code})`);
    this.name = 'TrackerUnreachable';
  }
}

export interface CreatedIssue {
  number: number;
  html_url: string;
}

export interface TrackerOptions {
  flavor: Flavor;
  baseUrl: string;
  repository: string;
  token: string;
  timeoutMs: number;
}

export class Tracker {
  private readonly base: string;
  private readonly owner: string;
  private readonly repo: string;

  constructor(private readonly options: TrackerOptions) {
    const root = options.baseUrl.replace(/\/+$/, '');
    // Gitea/Forgejo: the instance root; tolerate a base URL that already ends in /api/v1.
    this.base = options.flavor === 'gitea' ? `${root.replace(/\/api\/v1$/, '')}/api/v1` : root;
    [this.owner, this.repo] = options.repository.split('/');
  }

  /** Removes the token from text that came from outside. */
  scrub(text: string): string {
    return this.options.token ? text.split(this.options.token).join('[redacted]') : text;
  }

  private repoPath(suffix = ''): string {
    return `/repos/${encodeURIComponent(this.owner)}/${encodeURIComponent(this.repo)}${suffix}`;
  }

  /** Who the token belongs to: proves the token works. */
  async whoAmI(): Promise<string> {
    const user = await this.request<{ login?: unknown }>('GET', '/user', 'token check');
    return typeof user.login === 'string' ? user.login : 'unknown';
  }

  /** The repository exists and the token can see it. */
  async checkRepository(): Promise<void> {
    await this.request('GET', this.repoPath(), 'repository check');
  }

  /** `signal`: the request's deadline; aborted, the POST is cancelled (it may still have reached the tracker). */
  async createIssue(title: string, body: string, signal?: AbortSignal): Promise<CreatedIssue> {
    const issue = await this.request<{ number?: unknown; html_url?: unknown }>('POST', this.repoPath('/issues'), 'issue creation', { title, body }, signal);
    if (typeof issue.number !== 'number' || typeof issue.html_url !== 'string') throw new TrackerError('issue creation', 502, 'unexpected answer from the tracker', null);
    return { number: issue.number, html_url: issue.html_url };
  }

  private headers(hasBody: boolean): Record<string, string> {
    const headers: Record<string, string> =
      this.options.flavor === 'gitea'
        ? { authorization: `token ${this.options.token}`, accept: 'application/json' }
        : { authorization: `Bearer ${this.options.token}`, accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28' };
    headers['user-agent'] = 'carapace-github-bugs';
    if (hasBody) headers['content-type'] = 'application/json';
    return headers;
  }

  private async request<T>(method: 'GET' | 'POST', path: string, operation: string, body?: unknown, deadline?: AbortSignal): Promise<T> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.options.timeoutMs);
    const onDeadline = (): void => controller.abort();
    if (deadline?.aborted) controller.abort();
    deadline?.addEventListener('abort', onDeadline, { once: true });
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${this.base}${path}`, {
        method,
        headers: this.headers(body !== undefined),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: controller.signal,
        // Never follow: the Authorization header must not travel to wherever a redirect points.
        redirect: 'manual',
      });
      text = await response.text();
    } catch (err) {
      throw new TrackerUnreachable(operation, controller.signal.aborted ? 'ETIMEDOUT' : networkCode(err));
    } finally {
      clearTimeout(timer);
      deadline?.removeEventListener('abort', onDeadline);
    }
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    if (response.ok && parsed !== null && typeof parsed === 'object') return parsed as T;
    const message = (parsed as { message?: unknown } | null)?.message;
    const detail = typeof message === 'string' ? this.scrub(message).replace(/\s+/g, ' ').slice(0, 200) : '';
    if (response.ok) throw new TrackerError(operation, 502, 'unexpected answer from the tracker', null);
    throw new TrackerError(operation, response.status, detail, retryAfter(response));
  }
}

function retryAfter(response: Response): number | null {
  const header = Number(response.headers.get('retry-after'));
  if (Number.isFinite(header) && header > 0) return Math.ceil(header);
  if (response.headers.get('x-ratelimit-remaining') === '0') {
    const reset = Number(response.headers.get('x-ratelimit-reset'));
    if (Number.isFinite(reset) && reset > 0) return Math.max(1, Math.ceil(reset - Date.now() / 1000));
  }
  return null;
}

/** ECONNREFUSED & co. from undici's "fetch failed" (the code sits on err.cause). */
function networkCode(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown; cause?: { code?: unknown } } } | null;
  const code = e?.cause?.code ?? e?.code ?? e?.cause?.cause?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{2,40}$/.test(code) ? code : 'network error';
}
