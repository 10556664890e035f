// A Carapace plugin in plain JavaScript (an ES module). Copy this folder with
// `make plugin NAME=<name>` and check it with `make check-plugin DIR=<folder>`.
//
// It runs in a process of its own, as a user of its own, with nothing but its own
// configuration (its section of carapace.json, checked against manifest.json's
// config_schema, `${VAR}` references filled in from the plugin service's environment) and
// its own data folder (services.dataDir). Its network is only what manifest.json's
// `network` declares: here nothing, so any fetch() is refused.
//
// Import Node built-ins only: this folder may live where the project's `#sdk` does not
// resolve. The SDK's error classes come with the services (services.errors) instead.
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export default class TemplatePlugin {
  /** Once, before any request. Throw services.errors.InitError(category, message) to say why it cannot run. */
  async initialize(config, services) {
    this.errors = services.errors;
    this.greeting = config.greeting ?? 'Hello'; // config_schema's default is applied before this
    this.stateFile = join(services.dataDir, 'state.json');
    this.greeted = await readCount(this.stateFile);
  }

  /**
   * One tool call. The core has already checked the arguments against the tool's
   * arguments_schema (unknown fields refused, defaults filled in). Return plain JSON data;
   * throw a ToolError for an error the agent should see; anything else thrown is a crash.
   */
  async handleRequest(envelope, { signal }) {
    const tool = envelope.topic.slice('tool.invoke.'.length);
    if (tool !== 'template_hello') throw new this.errors.ToolError({ code: 'UNKNOWN_TOOL', message: `no tool ${tool}`, retriable: false });
    const name = envelope.payload.arguments.name.trim();
    // What a schema cannot say is checked here, and refused with a code the agent can act on.
    if (name === '') throw new this.errors.ToolError({ code: 'EMPTY_NAME', message: 'name is blank: give the person\'s name', retriable: false });
    // Past the deadline and nothing done yet: say so, and the agent may simply try again.
    if (signal.aborted) throw new this.errors.AbortedBeforeActing();
    this.greeted += 1;
    await writeAtomically(this.stateFile, JSON.stringify({ greeted: this.greeted }));
    return { text: `${this.greeting}, ${name}!`, greeted: this.greeted };
  }

  /** When the plugin host stops: close what is open (nothing here). Bounded by shutdown_timeout_ms. */
  async shutdown() {}
}

/** The count kept in the data folder; 0 on a first start. */
async function readCount(file) {
  try {
    const count = JSON.parse(await readFile(file, 'utf8')).greeted;
    return Number.isSafeInteger(count) && count >= 0 ? count : 0;
  } catch (err) {
    if (err.code === 'ENOENT') return 0;
    throw err; // unreadable or corrupt: initialize fails and says why (INTERNAL_ERROR)
  }
}

/** Replaced whole or not at all: a crash mid-write leaves the old file. */
async function writeAtomically(file, text) {
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, text, { mode: 0o600 });
  await rename(temp, file);
}
