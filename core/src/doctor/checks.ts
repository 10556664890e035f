// The doctor: what the appliance needs to work, checked now, in plain words with a fix for
// each problem. One implementation for the console's Checks page, GET /doctor and
// `make doctor`. Each check has its own deadline; none throws; a slow one never holds up
// the others.
import { statfs } from 'node:fs/promises';
import type { AuditFileHealth } from '../audit/audit-file.js';
import type { Sandbox } from '../agents/sandbox.js';
import { withCredential, type LlmCredential } from '../llm/llm-proxy.js';
import type { ConfigProblem } from '../config-errors.js';
import { leftoverCheck } from './leftover-volumes.js';
import type { BackupView } from '../backup/schedule.js';

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface Check {
  id: string;
  title: string;
  status: CheckStatus;
  detail: string;
  fix?: string;
}

export interface Report {
  ok: boolean;
  checks: Check[];
}

export interface PluginState {
  name: string;
  state: string | undefined;
  category: string | null;
  /** Why it failed or is starting again, when known. */
  detail?: string | null;
  /** Its events the configuration does not allow, kept until it does (why). */
  refusing?: string | null;
}

export interface DoctorDeps {
  model: { upstream: string; credential: LlmCredential };
  docker: { ping(): Promise<unknown>; hasImage(name: string): Promise<boolean> };
  agentImage: string;
  /** The image agents' programs run in (run_program, sandbox-runs/); unchecked when absent. */
  sandboxImage?: string;
  plugins: () => PluginState[];
  audit: () => AuditFileHealth;
  /** Folders whose free space matters (logs, data, workspaces); `claims`: bytes they may still take (workspace-claims.ts). */
  folders: { name: string; path: string; claims?: () => number }[];
  /** The agents' runtime, as chosen at start (agents/sandbox.ts). */
  sandbox?: Sandbox;
  /** carapace.json as the running core sees it (Core.configStatus): where the file is wrong, settings waiting for a restart. */
  config?: () => { problem: ConfigProblem | null; waiting_for_restart: string[] };
  /** Volumes an earlier version left (leftover-volumes.ts); absent where the core runs outside Compose. */
  leftovers?: () => Promise<string[] | null>;
  /** The last backup and the schedule (backup/schedule.ts). */
  backups?: () => BackupView;
  timeoutMs?: number;
}

const LOW_DISK_BYTES = 1 << 30;
const gibs = (bytes: number): string => `${(bytes / 2 ** 30).toFixed(1)} GiB`;
const FIX_ENV = 'edit .env, then run `docker compose up -d` again';

async function modelKey({ upstream, credential }: DoctorDeps['model'], signal: AbortSignal): Promise<Check> {
  const base = { id: 'model-key', title: 'Model key' };
  if (!credential.apiKey && !credential.oauthToken) {
    return { ...base, status: 'fail', detail: 'No model key is set: agents cannot answer.', fix: `put your Anthropic key in ANTHROPIC_API_KEY (or a Claude Code token in CLAUDE_CODE_OAUTH_TOKEN); ${FIX_ENV}` };
  }
  const host = new URL(upstream).host;
  let res: Response;
  try {
    // Listing models costs no tokens and needs a valid key.
    res = await fetch(new URL('/v1/models?limit=1', upstream), { headers: withCredential(new Headers({ 'anthropic-version': '2023-06-01' }), credential), signal });
  } catch (err) {
    return { ...base, status: 'fail', detail: `Cannot reach ${host}: ${(err as Error).name === 'AbortError' ? 'no answer in time' : (err as Error).message}.`, fix: 'check the server\'s internet connection (and CARAPACE_MODEL_API_URL in .env, if set)' };
  }
  if (res.status === 401 || res.status === 403) return { ...base, status: 'fail', detail: `${host} refuses the key (HTTP ${res.status}).`, fix: `copy the key again from the Anthropic console into .env; ${FIX_ENV}` };
  if (!res.ok) return { ...base, status: 'warn', detail: `${host} answered HTTP ${res.status} to a key check.`, fix: 'try again in a minute; if it stays, check the Anthropic status page' };
  return { ...base, status: 'ok', detail: `${host} accepts the key.` };
}

async function docker(deps: DoctorDeps): Promise<Check[]> {
  const engine = { id: 'docker', title: 'Docker engine' };
  try {
    await deps.docker.ping();
  } catch (err) {
    return [{ ...engine, status: 'fail', detail: `The core cannot reach Docker: ${(err as Error).message}.`, fix: 'compose.yaml must mount /var/run/docker.sock into the core; is Docker running (systemctl status docker)?' }];
  }
  const image = { id: 'agent-image', title: 'Agent image' };
  const [present, sandboxPresent] = await Promise.all([deps.agentImage, deps.sandboxImage].map((name) => (name ? deps.docker.hasImage(name).catch(() => false) : Promise.resolve(true))));
  const sandbox = { id: 'sandbox-image', title: 'Sandbox image' };
  return [
    { ...engine, status: 'ok', detail: 'The core reaches Docker.' },
    present
      ? { ...image, status: 'ok', detail: `${deps.agentImage} is there.` }
      : { ...image, status: 'fail', detail: `The agent image ${deps.agentImage} is missing: no agent can start.`, fix: 'run `make images` (or `docker build -f Dockerfile.agent -t carapace-agent:latest .`) in the Carapace folder' },
    ...(deps.sandboxImage === undefined ? [] : [sandboxPresent
      ? { ...sandbox, status: 'ok' as const, detail: `${deps.sandboxImage} is there: agents can run programs.` }
      : { ...sandbox, status: 'warn' as const, detail: `The sandbox image ${deps.sandboxImage} is missing: agents answer, but cannot run programs (run_program answers SANDBOX_UNAVAILABLE).`, fix: 'run `make images` (or `docker build -f Dockerfile.sandbox -t carapace-sandbox:latest .`) in the Carapace folder' }]),
  ];
}

function plugins(deps: DoctorDeps): Check[] {
  return pluginChecks(deps.plugins());
}

/** One check per plugin: running, not set up, starting, failed, or refusing messages for its configuration. */
export function pluginChecks(states: PluginState[]): Check[] {
  return states.map(({ name, state, category, detail, refusing }): Check => {
    const base = { id: `plugin-${name}`, title: `Plugin ${name}` };
    if (refusing) return { ...base, status: 'fail', detail: `${refusing}.`, fix: `in volumes/config/carapace.json, map that group in plugins.${name} (chats or groups), or list "${name}" in the group's plugins; the core takes the edit within a second and handles the kept messages` };
    if (state === 'healthy') return { ...base, status: 'ok', detail: 'Running.' };
    if (category === 'NOT_CONFIGURED') return { ...base, status: 'warn', detail: 'Not set up, so off.', fix: name === 'telegram' ? `to use Telegram, put your bot's token in TELEGRAM_BOT_TOKEN; ${FIX_ENV}` : `add its settings to volumes/config/carapace.json (see carapace.example.json), then restart` };
    if (state === 'starting') return { ...base, status: 'warn', detail: detail ? `Starting again: ${detail}.` : 'Starting, or the plugin host is away.', fix: 'wait a minute; if it stays, see `docker compose logs plugins`' };
    const fixes: Record<string, string> = {
      AUTH_ERROR: name === 'telegram' ? `Telegram refused the bot token: copy it again from @BotFather into TELEGRAM_BOT_TOKEN; ${FIX_ENV}` : `its server refused the credentials: check them in .env; ${FIX_ENV}`,
      NETWORK_ERROR: 'its server could not be reached: check the address in carapace.json and the internet connection',
      CONFIG_ERROR: 'its settings in carapace.json are wrong: see `docker compose logs plugins` for which one',
    };
    return { ...base, status: 'fail', detail: `Failed to start (${category ?? 'unknown'})${detail ? `: ${detail}` : ''}.`, fix: fixes[category ?? ''] ?? 'see `docker compose logs plugins`' };
  });
}

async function disk(deps: DoctorDeps): Promise<Check[]> {
  const audit = deps.audit();
  const checks: Check[] = [
    audit.ok
      ? { id: 'audit', title: 'Audit log', status: audit.failures > 0 ? 'warn' : 'ok', detail: audit.failures > 0 ? `Writable again; ${audit.failures} writes failed and ${audit.lost_entries} entries were lost since start.` : 'Writable.' }
      : { id: 'audit', title: 'Audit log', status: 'fail', detail: `Cannot be written (${audit.last_error ?? 'unknown'}): tool calls are refused.`, fix: 'free space on the disk that holds volumes/logs' },
  ];
  for (const { name, path, claims } of deps.folders) {
    const fs = await statfs(path).catch(() => null);
    if (!fs) continue;
    const free = fs.bavail * fs.bsize;
    const claimed = claims?.() ?? 0;
    const base = { id: `disk-${name}`, title: `Disk (${name})` };
    const still = claimed > 0 ? ` New workspaces may still claim ${gibs(claimed)}.` : '';
    if (claimed > free) checks.push({ ...base, status: 'warn', detail: `${gibs(free)} free, but new workspaces may still claim ${gibs(claimed)}: the group that does not fit cannot start.`, fix: 'free space on that disk, or lower agents.disk_quota_mb' });
    else if (free < LOW_DISK_BYTES) checks.push({ ...base, status: 'warn', detail: `Only ${gibs(free)} free.${still}`, fix: 'free space on that disk: old workspaces, logs, Docker images (`docker image prune`)' });
    else checks.push({ ...base, status: 'ok', detail: `${gibs(free)} free.${still}` });
  }
  return checks;
}

function sandboxCheck(sandbox: Sandbox): Check {
  const base = { id: 'agent-runtime', title: 'Agent sandbox' };
  return sandbox.runtime === 'runsc'
    ? { ...base, status: 'ok', detail: 'Agents run in gVisor (runsc): a user-space kernel between them and the host.' }
    : { ...base, status: 'warn', detail: `Agents run under runc and share the host's kernel (${sandbox.reason}).`, fix: sandbox.hint };
}

/** carapace.json: in force, broken since the core took it (the last good one runs), or changed in settings that wait for a restart. */
export function configCheck(status: { problem: ConfigProblem | null; waiting_for_restart: string[] }): Check {
  const base = { id: 'config', title: 'Configuration (carapace.json)' };
  const { problem, waiting_for_restart: waiting } = status;
  if (problem?.pointer) {
    // A plugin's section that does not fit its config_schema (config-watch/plugin-sections.ts).
    return { ...base, status: 'fail', detail: `${problem.file}, line ${problem.line}, column ${problem.column} (${problem.pointer}): ${problem.message}. Nothing of the file is taken until it is fixed: the plugin keeps its last good settings, or does not run if it had none.`, fix: `edit volumes/config/carapace.json at ${problem.pointer} (line ${problem.line}); the plugin's settings are described in README.md; the core takes the fixed file within a second` };
  }
  if (problem) {
    return { ...base, status: 'fail', detail: `${problem.file}, line ${problem.line}, column ${problem.column}: ${problem.message}. The configuration the core last took stays in force everywhere until the file is fixed.`, fix: `edit volumes/config/carapace.json at line ${problem.line}, column ${problem.column} (carapace.json.bak, if there, is the last file the core wrote); the core takes the fixed file within a second` };
  }
  if (waiting.length > 0) return { ...base, status: 'warn', detail: `Changed settings that take effect only when the core starts again: ${waiting.join(', ')}.`, fix: 'run `docker compose restart`' };
  return { ...base, status: 'ok', detail: 'In force in the core and every plugin; edits take effect within a second.' };
}

/** Backups: the last one worked and is recent enough, failed (what and why), or none yet. */
export function backupCheck(view: BackupView): Check {
  const base = { id: 'backups', title: 'Backups' };
  const schedule = view.schedule === 'daily' ? `daily at ${view.at} UTC into ${view.dir}, the newest ${view.keep} kept` : 'not scheduled (backups.schedule is "off")';
  const last = view.last;
  if (last && !last.ok) {
    return { ...base, status: 'fail', detail: `The last backup (${last.kind}, ${last.at}) failed: ${last.code ?? 'BACKUP_FAILED'}: ${last.message ?? 'no reason recorded'}.${view.last_ok_at ? ` The last one that worked: ${view.last_ok_at}.` : ' None has worked yet.'} Backups: ${schedule}.`, fix: 'fix what the message says, then run `make backup`; see Activity for each attempt' };
  }
  if (!last) {
    return { ...base, status: 'warn', detail: `No backup has been made yet. Backups: ${schedule}${view.next_at ? `; the next at ${view.next_at}` : ''}.`, fix: view.schedule === 'daily' ? 'wait for the first, or run `make backup` now' : 'run `make backup`, or set backups.schedule to "daily" in carapace.json' };
  }
  const age = Date.now() - Date.parse(last.at);
  if (view.schedule === 'daily' && age > 2 * 24 * 60 * 60 * 1000) {
    return { ...base, status: 'warn', detail: `The last backup is from ${last.at}, more than two days ago, though they are scheduled ${schedule}.`, fix: 'see Activity and `docker compose logs core` for why the scheduled ones did not run; run `make backup` now' };
  }
  return { ...base, status: 'ok', detail: `The last backup (${last.kind}) was made ${last.at}: ${last.path}, ${last.files} files. Backups: ${schedule}.` };
}

/** Runs every check, each bounded by `timeoutMs` (default 8 s). */
export async function runChecks(deps: DoctorDeps): Promise<Report> {
  const timeoutMs = deps.timeoutMs ?? 8000;
  const bounded = async (id: string, title: string, run: (signal: AbortSignal) => Promise<Check | Check[]>): Promise<Check[]> => {
    const abort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<Check[]>((resolve) => {
      timer = setTimeout(() => {
        abort.abort();
        resolve([{ id, title, status: 'fail', detail: `No answer within ${timeoutMs / 1000} s.`, fix: 'try again; if it stays, see `docker compose logs core`' }]);
      }, timeoutMs);
    });
    const done = run(abort.signal).then((c) => (Array.isArray(c) ? c : [c]), (err: unknown) => [{ id, title, status: 'fail' as const, detail: `The check failed: ${(err as Error).message}.` }]);
    try {
      return await Promise.race([done, late]);
    } finally {
      clearTimeout(timer);
    }
  };
  const groups = await Promise.all([
    bounded('model-key', 'Model key', (signal) => modelKey(deps.model, signal)),
    bounded('docker', 'Docker engine', () => docker(deps)),
    bounded('disk', 'Disk', () => disk(deps)),
  ]);
  if (deps.sandbox) groups.push([sandboxCheck(deps.sandbox)]);
  const leftovers = deps.leftovers;
  if (leftovers) groups.push(await bounded('leftover-volumes', 'Volumes from earlier versions', async () => {
    const names = await leftovers();
    return names === null ? [] : leftoverCheck(names);
  }));
  const checks = [...(deps.config ? [configCheck(deps.config())] : []), ...groups[0], ...groups[1], ...plugins(deps), ...groups.slice(2).flat(), ...(deps.backups ? [backupCheck(deps.backups())] : [])];
  return { ok: checks.every((c) => c.status !== 'fail'), checks };
}
