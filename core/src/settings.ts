// Where things live, from the environment, with defaults that work from a checkout.
import { join, resolve } from 'node:path';

export interface Paths {
  runDir: string;
  pluginsDir: string;
  handlersDir: string;
  configFile: string;
  logDir: string;
  dataDir: string;
  groupsDir: string;
  agentImageDir: string;
  /** Skills: the bundled ones (skills/), and the person's own (propose_write writes them after a yes; in data/, so backups keep them). */
  skills: { bundled: string; own: string };
  /** The person's documents: propose_write writes text files there after a yes; no agent or sandbox mounts it (in data/, so backups keep it). */
  documentsDir: string;
  /** API mode: where bearer-token directories are made; unset, the agent manager uses the OS temp dir. */
  apiKeyDir: string | undefined;
}

export function pathsFromEnv(env: NodeJS.ProcessEnv = process.env): Paths {
  const at = (name: string, fallback: string): string => resolve(env[name] || fallback);
  const logDir = at('CARAPACE_LOG_DIR', 'volumes/logs');
  const dataDir = at('CARAPACE_DATA_DIR', 'volumes/data');
  return {
    runDir: at('CARAPACE_RUN_DIR', '/run/carapace'),
    // Bundled plugins first, then the person's own: folders separated by ":".
    pluginsDir: (env.CARAPACE_PLUGINS_DIR || 'plugins').split(':').filter(Boolean).map((d) => resolve(d)).join(':'),
    handlersDir: at('CARAPACE_HANDLERS_DIR', 'dist/plugins'),
    configFile: at('CARAPACE_CONFIG', 'volumes/config/carapace.json'),
    logDir,
    dataDir,
    groupsDir: at('CARAPACE_GROUPS_DIR', 'volumes/groups'),
    agentImageDir: at('CARAPACE_AGENT_IMAGE_DIR', 'agent-image'),
    skills: { bundled: at('CARAPACE_SKILLS_DIR', 'skills'), own: at('CARAPACE_OWN_SKILLS_DIR', join(dataDir, 'skills')) },
    documentsDir: at('CARAPACE_DOCUMENTS_DIR', join(dataDir, 'documents')),
    apiKeyDir: env.CARAPACE_API_KEY_DIR || undefined,
  };
}

export function auditFile(paths: Paths): string {
  return join(paths.logDir, 'audit.jsonl');
}

/** Credentials the core itself holds; never to appear in anything it forwards. */
export function coreSecrets(env: NodeJS.ProcessEnv = process.env): string[] {
  return ['ANTHROPIC_API_KEY', 'CLAUDE_CODE_OAUTH_TOKEN', 'CARAPACE_ADMIN_TOKEN', 'CARAPACE_BACKUP_PASSPHRASE'].map((k) => env[k] ?? '').filter((v) => v.length > 0);
}
