// create_bug_report: files an issue on GitHub or a Gitea/Forgejo instance with both
// perspectives, the agent's narrative and the host-side audit trail of the requests it
// names (group-scoped by the core). The token never leaves this process except in the
// Authorization header; it is also scrubbed from everything the plugin writes.
import pino from 'pino';
import { AbortedBeforeActing, InitError, ToolError, type CoreServices, type PluginConfig, type PluginHandler, type RequestContext, type RequestEnvelope } from '#sdk';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { FiledReports } from './filed-reports.js';
import { describeEvidence, renderBody, scrubCredentials, type Evidence } from './report.js';
import { Tracker, TrackerError, TrackerUnreachable, type Flavor } from './tracker.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'github-bugs' } }, pino.destination(2));

export default class GitHubBugs implements PluginHandler {
  private services!: CoreServices;
  private tracker!: Tracker;
  private token = '';
  private filed!: FiledReports;

  async initialize(config: PluginConfig, services: CoreServices): Promise<void> {
    this.services = services;
    this.filed = new FiledReports(join(services.dataDir, 'filed-reports.json'));
    // The host has validated the config against the manifest's config_schema (defaults applied).
    const flavor: Flavor = config.flavor === 'gitea' ? 'gitea' : 'github';
    this.token = String(config.token ?? '');
    this.tracker = new Tracker({
      flavor,
      baseUrl: String(config.api_base_url ?? 'https://api.github.com'),
      repository: String(config.repository),
      token: this.token,
      timeoutMs: typeof config.timeout_ms === 'number' ? config.timeout_ms : 15_000,
    });
    let login: string;
    try {
      login = await this.tracker.whoAmI();
    } catch (err) {
      throw initFailure(err, 'token check');
    }
    try {
      await this.tracker.checkRepository();
    } catch (err) {
      throw initFailure(err, 'repository check');
    }
    log.info({ flavor, repository: config.repository, login }, 'issue tracker reachable; token accepted');
  }

  /** For the prompt: the host-side evidence the report would carry, as the audit log holds it now. */
  async describeCall(tool: string, args: Record<string, unknown>): Promise<string[]> {
    if (tool !== 'create_bug_report') return [];
    return describeEvidence(await this.evidence(args), [this.token]);
  }

  async handleRequest(envelope: RequestEnvelope, context?: RequestContext): Promise<unknown> {
    if (envelope.topic !== 'tool.invoke.create_bug_report') throw new ToolError({ message: 'unknown tool', retriable: false });
    const args = envelope.payload.arguments;
    // The same report twice makes no sense: one approval is not a licence to file it again.
    const key = createHash('sha256').update(JSON.stringify([args.title, args.description, args.severity, args.correlation_ids])).digest('hex');
    const earlier = this.filed.find(key);
    if (earlier) {
      throw new ToolError({ code: 'DUPLICATE_REPORT', message: `an identical report was already filed at ${earlier.at}: ${earlier.url}; nothing was filed again`, retriable: false });
    }
    const evidence = await this.evidence(args);
    const title = scrubCredentials(String(args.title).replace(/\s+/g, ' ').trim(), [this.token]);
    const body = renderBody({ description: String(args.description), severity: String(args.severity), evidence, secrets: [this.token] });
    // Out of time while gathering evidence: nothing was filed, the agent may simply try again.
    if (context?.signal.aborted) throw new AbortedBeforeActing();
    try {
      // Once the POST is out, an abort cancels it but it may have been filed: RESULT_UNKNOWN.
      const issue = await this.tracker.createIssue(title, body, context?.signal);
      log.info({ number: issue.number, correlations: evidence.length }, 'bug report filed');
      this.filed.add(key, issue.html_url);
      return { url: issue.html_url, number: issue.number };
    } catch (err) {
      throw toolError(err);
    }
  }

  /** This group's audit entries for each correlation id the report names, asked all at once. */
  private evidence(args: Record<string, unknown>): Promise<Evidence[]> {
    const ids = Array.isArray(args.correlation_ids) ? args.correlation_ids.map(String) : [];
    return Promise.all(
      ids.map(async (correlation): Promise<Evidence> => {
        try {
          // Scoped by the core to the group of this request: another group's ids find nothing.
          return { correlation, entries: await this.services.getAuditLog({ correlation }) };
        } catch (err) {
          log.warn({ correlation, err: String(err) }, 'audit log unavailable for a correlation id');
          return { correlation, entries: null };
        }
      }),
    );
  }
}

function initFailure(err: unknown, what: string): Error {
  if (err instanceof TrackerUnreachable) return new InitError('NETWORK_ERROR', err.message);
  if (err instanceof TrackerError) {
    if (err.status === 401) return new InitError('AUTH_ERROR', `the issue tracker rejected the token (${what}: HTTP 401)`);
    if (err.status === 403 && err.retryAfter === null) return new InitError('AUTH_ERROR', `the token is not allowed to do this (${what}: HTTP 403)`);
    if (err.status >= 300 && err.status < 400) return new InitError('CONFIG_ERROR', `the tracker redirected the ${what} (HTTP ${err.status}): the repository moved, or api_base_url is not the API root`);
    if (err.status === 404) {
      return new InitError(
        'CONFIG_ERROR',
        what === 'repository check' ? 'repository not found, or the token cannot see it' : 'the API answered 404: check api_base_url and flavor',
      );
    }
    if (err.status === 429 || err.status === 403 || err.status >= 500) return new InitError('NETWORK_ERROR', err.message);
    return new InitError('INTERNAL_ERROR', err.message);
  }
  return err instanceof Error ? err : new Error(String(err));
}

/** What the agent sees: what happened and what to do, never a URL, header or token. */
function toolError(err: unknown): unknown {
  if (err instanceof TrackerUnreachable) {
    if (err.code === 'ETIMEDOUT') {
      return new ToolError({ code: 'TRACKER_TIMEOUT', message: 'the issue tracker did not answer in time; the issue may have been filed anyway, so ask the user to check before trying again', retriable: false });
    }
    return new ToolError({ code: 'TRACKER_UNAVAILABLE', message: 'the issue tracker is unreachable right now; try again in a few minutes (no issue was filed)', retriable: true });
  }
  if (!(err instanceof TrackerError)) return err;
  const { status } = err;
  if (status === 429 || (status === 403 && err.retryAfter !== null)) {
    const wait = err.retryAfter ?? 60;
    return new ToolError({ code: 'TRACKER_RATE_LIMITED', message: `the issue tracker's rate limit is exhausted; try again in ${wait} s`, retriable: true });
  }
  if (status === 401) {
    return new ToolError({ code: 'TRACKER_AUTH', message: 'the issue tracker no longer accepts the configured token; tell the user the operator must renew it', retriable: false });
  }
  if (status === 403) {
    return new ToolError({ code: 'TRACKER_AUTH', message: 'the configured token may not create issues in this repository; tell the user the operator must fix its permissions', retriable: false });
  }
  if (status === 404) {
    return new ToolError({ code: 'TRACKER_NOT_FOUND', message: 'the configured repository was not found (or the token cannot see it); tell the user the operator must check it', retriable: false });
  }
  if (status >= 300 && status < 400) {
    return new ToolError({ code: 'TRACKER_NOT_FOUND', message: 'the configured repository has moved or been renamed; tell the user the operator must update the configuration', retriable: false });
  }
  if (status === 410) return new ToolError({ code: 'TRACKER_DISABLED', message: 'issues are disabled for the configured repository', retriable: false });
  if (status === 422 || status === 400) {
    return new ToolError({ code: 'TRACKER_REJECTED', message: `the issue tracker refused the report${err.detail ? ` (${err.detail})` : ''}; shorten or simplify the title and description`, retriable: false });
  }
  if (status >= 500) return new ToolError({ code: 'TRACKER_UNAVAILABLE', message: `the issue tracker failed (HTTP ${status}); try again later (no issue was filed)`, retriable: true });
  return new ToolError({ code: 'TRACKER_ERROR', message: `the issue tracker answered HTTP ${status}${err.detail ? ` (${err.detail})` : ''}`, retriable: false });
}
