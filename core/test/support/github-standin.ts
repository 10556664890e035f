// An issue-tracker stand-in for tests: an HTTP server on 127.0.0.1 speaking the REST JSON
// of GitHub (/user, /repos/{owner}/{repo}, POST /repos/{owner}/{repo}/issues) and of
// Gitea/Forgejo (the same under /api/v1). It records every request and every issue;
// a wrong token gets 401, an unknown repository 404, as on the real services.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type StandInFlavor = 'github' | 'gitea';

export interface StandInIssue {
  flavor: StandInFlavor;
  repository: string;
  number: number;
  title: string;
  body: string;
  html_url: string;
}

export interface RecordedRequest {
  flavor: StandInFlavor;
  method: string;
  path: string;
  authorization: string | null;
  accept: string | null;
  /** The raw request body (what went over the wire). */
  raw: string;
  status: number;
  at: number;
}

interface Failure {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

const LOGIN = 'carapace-bot';
const GITHUB_DOCS = 'https://docs.github.com/rest';

export class GitHubStandIn {
  readonly issues: StandInIssue[] = [];
  readonly requests: RecordedRequest[] = [];
  url = '';
  private server!: Server;
  private readonly repositories = new Map<string, { full_name: string; id: number; next: number }>();
  /** Old full name (lower case) → new one, as after a rename on the real services. */
  private readonly moved = new Map<string, string>();
  private readonly failures: Failure[] = [];
  private ids = 1000;

  private constructor(private token: string) {}

  static async start(opts: { token: string; repositories: string[] }): Promise<GitHubStandIn> {
    const standIn = new GitHubStandIn(opts.token);
    for (const repository of opts.repositories) standIn.addRepository(repository);
    standIn.server = createServer((req, res) => void standIn.handle(req, res));
    await new Promise<void>((resolve) => standIn.server.listen(0, '127.0.0.1', resolve));
    standIn.url = `http://127.0.0.1:${(standIn.server.address() as AddressInfo).port}`;
    return standIn;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // ---- test helpers --------------------------------------------------------------------

  addRepository(fullName: string): void {
    this.repositories.set(fullName.toLowerCase(), { full_name: fullName, id: ++this.ids, next: 1 });
  }

  removeRepository(fullName: string): void {
    this.repositories.delete(fullName.toLowerCase());
  }

  /** Renames a repository: the old name answers with a redirect (301 for GET, 307 otherwise). */
  moveRepository(from: string, to: string): void {
    const repo = this.repositories.get(from.toLowerCase());
    if (!repo) throw new Error(`no repository ${from}`);
    this.repositories.delete(from.toLowerCase());
    this.moved.delete(to.toLowerCase());
    this.repositories.set(to.toLowerCase(), { ...repo, full_name: to });
    this.moved.set(from.toLowerCase(), to);
  }

  /** The token the tracker accepts from now on (an old one becomes "Bad credentials"). */
  rotateToken(token: string): void {
    this.token = token;
  }

  /** The next issue creation answers this instead (a 5xx, a rate limit, ...). */
  failNextIssue(status: number, body: unknown = { message: 'Server Error' }, headers: Record<string, string> = {}): void {
    this.failures.push({ status, body, headers });
  }

  issuesIn(repository: string): StandInIssue[] {
    return this.issues.filter((i) => i.repository.toLowerCase() === repository.toLowerCase());
  }

  // ---- the API -------------------------------------------------------------------------

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://standin');
    const gitea = url.pathname.startsWith('/api/v1/');
    const flavor: StandInFlavor = gitea ? 'gitea' : 'github';
    const path = gitea ? url.pathname.slice('/api/v1'.length) : url.pathname;
    const method = req.method ?? 'GET';
    const authorization = typeof req.headers.authorization === 'string' ? req.headers.authorization : null;
    const accept = typeof req.headers.accept === 'string' ? req.headers.accept : null;
    const send = (status: number, body: unknown, headers: Record<string, string> = {}): void => {
      this.requests.push({ flavor, method, path: url.pathname, authorization, accept, raw, status, at: Date.now() });
      if (res.writableEnded || res.destroyed) return;
      const common = flavor === 'github' ? { 'x-github-media-type': 'github.v3; format=json', 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '4999' } : {};
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...common, ...headers });
      res.end(body === undefined ? '' : JSON.stringify(body));
    };
    const notFound = (): void =>
      flavor === 'github'
        ? send(404, { message: 'Not Found', documentation_url: GITHUB_DOCS, status: '404' })
        : send(404, { errors: ['user redirect does not exist'], message: 'The target couldn\'t be found.', url: `${this.url}/api/swagger` });

    // Authentication. GitHub takes "Bearer <t>" or "token <t>"; Gitea "token <t>" or "Bearer <t>".
    const presented = /^(?:Bearer|token)\s+(.+)$/i.exec(authorization ?? '')?.[1] ?? null;
    if (presented === null) {
      return flavor === 'github'
        ? send(401, { message: 'Requires authentication', documentation_url: GITHUB_DOCS, status: '401' })
        : send(401, { message: 'token is required', url: `${this.url}/api/swagger` });
    }
    if (presented !== this.token) {
      return flavor === 'github'
        ? send(401, { message: 'Bad credentials', documentation_url: GITHUB_DOCS, status: '401' })
        : send(401, { message: 'invalid username, password or token', url: `${this.url}/api/swagger` });
    }

    if (method === 'GET' && path === '/user') {
      return send(200, flavor === 'github'
        ? { login: LOGIN, id: 4242, node_id: 'U_kgDOAAAQkg', type: 'User', site_admin: false, name: 'Carapace Bot', html_url: `${this.url}/${LOGIN}` }
        : { id: 4242, login: LOGIN, login_name: '', full_name: 'Carapace Bot', email: 'bot@example.invalid', is_admin: false, username: LOGIN });
    }

    const match = /^\/repos\/([^/]+)\/([^/]+)(\/issues)?$/.exec(path);
    if (!match) return notFound();
    const fullName = `${decodeURIComponent(match[1])}/${decodeURIComponent(match[2])}`;
    const repo = this.repositories.get(fullName.toLowerCase());
    const movedTo = this.moved.get(fullName.toLowerCase());
    if (!repo && movedTo) {
      const target = this.repositories.get(movedTo.toLowerCase())!;
      const location = `${this.url}${gitea ? '/api/v1' : ''}/repositories/${target.id}${match[3] ?? ''}`;
      return send(method === 'GET' ? 301 : 307, { message: 'Moved Permanently', url: location, documentation_url: GITHUB_DOCS }, { location });
    }
    if (!repo) return notFound();
    const [owner, name] = repo.full_name.split('/');

    if (!match[3]) {
      if (method !== 'GET') return notFound();
      return send(200, flavor === 'github'
        ? { id: repo.id, name, full_name: repo.full_name, private: true, owner: { login: owner }, has_issues: true, html_url: `${this.url}/${repo.full_name}` }
        : { id: repo.id, name, full_name: repo.full_name, private: true, owner: { login: owner, username: owner }, has_issues: true, html_url: `${this.url}/${repo.full_name}` });
    }
    if (method !== 'POST') return notFound();

    const failure = this.failures.shift();
    if (failure) return send(failure.status, failure.body, failure.headers);

    let input: { title?: unknown; body?: unknown };
    try {
      input = JSON.parse(raw) as typeof input;
    } catch {
      return send(400, flavor === 'github' ? { message: 'Problems parsing JSON', documentation_url: GITHUB_DOCS, status: '400' } : { message: 'invalid JSON', url: `${this.url}/api/swagger` });
    }
    if (typeof input?.title !== 'string' || input.title.trim() === '') {
      return flavor === 'github'
        ? send(422, { message: 'Validation Failed', errors: [{ resource: 'Issue', code: 'missing_field', field: 'title' }], documentation_url: GITHUB_DOCS, status: '422' })
        : send(422, { message: '[Title]: Required', url: `${this.url}/api/swagger` });
    }
    const number = repo.next++;
    const now = new Date().toISOString();
    const html_url = `${this.url}/${repo.full_name}/issues/${number}`;
    const body = typeof input.body === 'string' ? input.body : '';
    this.issues.push({ flavor, repository: repo.full_name, number, title: input.title, body, html_url });
    const id = ++this.ids;
    const user = { login: LOGIN, id: 4242 };
    return send(201, flavor === 'github'
      ? {
          url: `${this.url}/repos/${repo.full_name}/issues/${number}`,
          repository_url: `${this.url}/repos/${repo.full_name}`,
          html_url,
          id,
          node_id: `I_kwDO${id}`,
          number,
          title: input.title,
          user: { ...user, type: 'User' },
          labels: [],
          state: 'open',
          locked: false,
          assignee: null,
          assignees: [],
          milestone: null,
          comments: 0,
          created_at: now,
          updated_at: now,
          closed_at: null,
          author_association: 'OWNER',
          body,
        }
      : {
          id,
          url: `${this.url}/api/v1/repos/${repo.full_name}/issues/${number}`,
          html_url,
          number,
          user: { ...user, username: LOGIN },
          original_author: '',
          title: input.title,
          body,
          ref: '',
          labels: [],
          milestone: null,
          assignee: null,
          assignees: null,
          state: 'open',
          is_locked: false,
          comments: 0,
          created_at: now,
          updated_at: now,
          closed_at: null,
          due_date: null,
          pull_request: null,
          repository: { id: repo.id, name, owner, full_name: repo.full_name },
        }, flavor === 'github' ? { location: `${this.url}/repos/${repo.full_name}/issues/${number}` } : {});
  }
}
