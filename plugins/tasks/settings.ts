// The scheduler's settings, from its section of carapace.json (validated against the
// manifest's config_schema by the host, defaults applied): what the plugin checks itself is
// what a schema cannot say (a real time zone, cron expressions, unique ids).
import { InitError, type PluginConfig } from '#sdk';
import { cronProblem, timezoneProblem } from './time.js';

export interface ConfiguredTask {
  id: string;
  group: string;
  cron: string;
  prompt: string;
}

export interface Settings {
  timezone: string;
  runMissed: boolean;
  maxFailures: number;
  minIntervalS: number;
  maxPerGroup: number;
  maxOneShotPerDay: number;
  configured: ConfiguredTask[];
}

export function parseSettings(config: PluginConfig): Settings {
  // The host has validated the config against the manifest's config_schema (defaults applied).
  const timezone = String(config.timezone ?? 'UTC');
  const zoneProblem = timezoneProblem(timezone);
  if (zoneProblem) throw new InitError('CONFIG_ERROR', `timezone: ${zoneProblem}`);
  const configured = (Array.isArray(config.tasks) ? config.tasks : []) as ConfiguredTask[];
  const ids = new Set<string>();
  configured.forEach((task, i) => {
    if (ids.has(task.id)) throw new InitError('CONFIG_ERROR', `tasks[${i}]: duplicate id "${task.id}"`);
    ids.add(task.id);
    const problem = cronProblem(task.cron);
    if (problem) throw new InitError('CONFIG_ERROR', `tasks[${i}] "${task.id}": invalid cron "${task.cron}": ${problem}`);
  });
  return {
    timezone,
    runMissed: config.run_missed_on_startup !== false,
    maxFailures: typeof config.max_consecutive_failures === 'number' ? config.max_consecutive_failures : 5,
    minIntervalS: typeof config.min_interval_seconds === 'number' ? config.min_interval_seconds : 60,
    maxPerGroup: typeof config.max_tasks_per_group === 'number' ? config.max_tasks_per_group : 50,
    maxOneShotPerDay: typeof config.max_one_shot_per_day === 'number' ? config.max_one_shot_per_day : 20,
    configured,
  };
}
