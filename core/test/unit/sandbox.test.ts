// Which runtime agents get: runsc only when it is registered so that agents can reach
// their sockets and the probe container passes; otherwise runc, saying why and how to get it.
import { describe, expect, it } from '@jest/globals';
import { chooseSandbox } from '../../src/agents/sandbox.js';
import { StartupError } from '../../src/protocol/errors.js';

const engine = (runtimes: Record<string, { path?: string; runtimeArgs?: string[] }>) => ({ info: async () => ({ Runtimes: runtimes }) });
const good = { runc: { path: 'runc' }, runsc: { path: '/usr/bin/runsc', runtimeArgs: ['--platform=ptrace', '--network=none', '--host-uds=all'] } };
const passes = async () => null;

describe('chooseSandbox', () => {
  it('auto: runsc when registered with --host-uds=all and the probe passes', async () => {
    expect(await chooseSandbox(engine(good), 'auto', passes)).toMatchObject({ runtime: 'runsc' });
  });

  it('auto: runc, with the reason and how to get runsc, when it is missing, lacks host-uds, or fails the probe', async () => {
    const missing = await chooseSandbox(engine({ runc: {} }), 'auto', passes);
    expect(missing).toMatchObject({ runtime: 'runc', reason: expect.stringContaining('no runsc'), hint: expect.stringContaining('bookworm-backports') });
    const noUds = await chooseSandbox(engine({ runsc: { path: '/usr/bin/runsc', runtimeArgs: ['--network=none'] } }), 'auto', passes);
    expect(noUds).toMatchObject({ runtime: 'runc', reason: expect.stringContaining('--host-uds=all') });
    let probed = 0;
    const old = await chooseSandbox(engine(good), 'auto', async () => (probed++, '`stat /` failed'));
    expect(probed).toBe(1);
    expect(old).toMatchObject({ runtime: 'runc', reason: expect.stringContaining('too old') });
  });

  it('runsc asked for but unusable: one clear start-up error; runc asked for: runc without asking the engine', async () => {
    await expect(chooseSandbox(engine({ runc: {} }), 'runsc', passes)).rejects.toBeInstanceOf(StartupError);
    await expect(chooseSandbox(engine(good), 'runsc', async () => 'fails')).rejects.toThrow(/too old/);
    const asked = { info: async () => { throw new Error('must not be asked'); } };
    expect(await chooseSandbox(asked, 'runc', passes)).toMatchObject({ runtime: 'runc' });
  });

  it('an engine that does not answer: runc for now, asked again later', async () => {
    const down = { info: async () => { throw new Error('connect ENOENT /var/run/docker.sock'); } };
    expect(await chooseSandbox(down, 'auto', passes)).toMatchObject({ runtime: 'runc', provisional: true });
  });
});
