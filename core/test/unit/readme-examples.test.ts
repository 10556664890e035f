// README's set-up sections ("Setting up email", "Setting up calendar and reminders") give a
// complete carapace.json per provider: each must be a file the core takes as it is (its own
// schema, every plugin section against its manifest's config_schema, as the core checks it),
// that the plugin host takes with the secrets filled in from .env (the variables compose.yaml
// hands the plugin host), and that the plugin itself takes (its settings parser: time zones,
// URLs, calendars).
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { configFromText } from '../../src/config.js';
import { pluginSectionProblem } from '../../src/config-watch/plugin-sections.js';
import { INTRINSIC_NAMES } from '../../src/intrinsics/intrinsics.js';
import { discoverPlugins } from '../../src/plugins/discovery.js';
import { APP_VERSION } from '../../src/version.js';
import { resolvePluginConfig } from '../../plugin-host/plugin-config.js';
import { parseSettings as emailSettings } from '../../../plugins/email/settings.js';
import { parseSettings as calendarSettings } from '../../../plugins/calendar/settings.js';
import { ROOT } from '../harness.js';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const plugins = new Map(discoverPlugins(join(ROOT, 'plugins'), APP_VERSION, INTRINSIC_NAMES).plugins.map((p) => [p.name, p]));

/** The text of README's section `title` (up to the next "## "). */
function section(title: string): string {
  const start = README.indexOf(`\n## ${title}\n`);
  expect(start).toBeGreaterThanOrEqual(0);
  const end = README.indexOf('\n## ', start + 1);
  return README.slice(start, end < 0 ? undefined : end);
}

const jsonBlocks = (text: string): string[] => [...text.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1]);

/** The variables compose.yaml hands the plugins service (`NAME: ${NAME:-}`): the only ones a plugin section can take. */
function pluginHostVariables(): Set<string> {
  const compose = readFileSync(join(ROOT, 'compose.yaml'), 'utf8');
  const service = compose.slice(compose.indexOf('\n  plugins:\n'));
  return new Set([...service.matchAll(/^\s+([A-Z][A-Z0-9_]*): \$\{\1:-\}$/gm)].map((m) => m[1]));
}

function checkExample(text: string): Record<string, Record<string, unknown>> {
  const config = configFromText('README.md example', text);
  expect(pluginSectionProblem('README.md example', text, config.plugins, (name) => plugins.get(name)?.manifest.config_schema)).toBeNull();
  const variables = pluginHostVariables();
  const resolved: Record<string, Record<string, unknown>> = {};
  for (const [name, raw] of Object.entries(config.plugins)) {
    const plugin = plugins.get(name);
    expect(plugin).toBeDefined();
    const referenced = [...JSON.stringify(raw).matchAll(/\$\{([A-Z_][A-Z0-9_]*)\}/g)].map((m) => m[1]);
    expect(referenced.filter((v) => !variables.has(v))).toEqual([]);
    // As the plugin host takes it, with each secret set in .env.
    const env = Object.fromEntries(referenced.map((v) => [v, v === 'TELEGRAM_BOT_TOKEN' ? '123456789:AAH-example_token-0123456789abcdef' : 'an-app-password-1234']));
    const host = resolvePluginConfig(structuredClone(raw), plugin!.manifest.config_schema, env);
    expect(host).toMatchObject({ ok: true });
    if (host.ok) resolved[name] = host.config;
  }
  return resolved;
}

describe('README set-up examples', () => {
  it('email: Gmail, Fastmail and a self-hosted server, each a complete carapace.json the core, the plugin host and the plugin take', () => {
    const blocks = jsonBlocks(section('Setting up email'));
    expect(blocks).toHaveLength(3);
    const hosts = blocks.map((text) => {
      const resolved = checkExample(text);
      const settings = emailSettings(resolved.email);
      expect(settings.imap.password).toBe('an-app-password-1234');
      expect(settings.mailboxes.size).toBeGreaterThan(0);
      return `${settings.imap.host}:${settings.imap.port} ${settings.smtp.host}:${settings.smtp.port}`;
    });
    expect(hosts).toEqual(['imap.gmail.com:993 smtp.gmail.com:465', 'imap.fastmail.com:993 smtp.fastmail.com:465', 'mail.example.org:993 mail.example.org:587']);
  });

  it('calendar and reminders: iCloud, Nextcloud and Fastmail, each a complete carapace.json the core, the plugin host and the calendar plugin take', () => {
    const blocks = jsonBlocks(section('Setting up calendar and reminders'));
    expect(blocks).toHaveLength(3);
    const urls = blocks.map((text) => {
      const resolved = checkExample(text);
      expect(Object.keys(resolved).sort()).toEqual(['calendar', 'reminders', 'telegram']);
      const settings = calendarSettings(resolved.calendar);
      expect(settings.password).toBe('an-app-password-1234');
      expect(new URL(String(resolved.reminders.server_url)).href).toBe(settings.serverUrl);
      return settings.serverUrl;
    });
    expect(urls).toEqual(['https://caldav.icloud.com/', 'https://cloud.example.org/remote.php/dav', 'https://caldav.fastmail.com/dav/']);
  });

  it('says where each secret goes, that edits take effect live, how to test the connection, and once that Compose v1 works the same', () => {
    const text = section('Setting up email') + section('Setting up calendar and reminders');
    for (const said of ['`EMAIL_PASSWORD`', '`CALENDAR_PASSWORD`', '`REMINDERS_PASSWORD`', 'within a second', 'Test connection', '`docker-compose up -d` works the same']) expect(text).toContain(said);
  });
});
