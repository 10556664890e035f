// Volumes an earlier version's compose.yaml declared (`api-keys`, since renamed
// `api-sockets`): Compose never removes them, so the doctor names them and how to remove
// them. Real volumes on the real engine, labelled as Compose labels them; only this
// installation's project counts, and today's volumes are never named.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Docker from 'dockerode';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { COMPOSE_VOLUMES, leftoverCheck, leftoverVolumes } from '../../src/doctor/leftover-volumes.js';
import { ROOT } from '../harness.js';

const docker = new Docker();
const project = `cpleft${process.pid}`;
const other = `cpother${process.pid}`;
const made: string[] = [];

async function composeVolume(proj: string, volume: string): Promise<void> {
  const name = `${proj}_${volume}`;
  await docker.createVolume({ Name: name, Labels: { 'com.docker.compose.project': proj, 'com.docker.compose.volume': volume } });
  made.push(name);
}

beforeAll(async () => {
  for (const v of ['sockets', 'api-sockets', 'egress', 'api-keys']) await composeVolume(project, v);
  await composeVolume(other, 'api-keys');
});

afterAll(async () => {
  for (const name of made) await docker.getVolume(name).remove().catch(() => undefined);
});

describe('volumes an earlier version left', () => {
  it("today's compose.yaml declares exactly the volumes the doctor keeps", () => {
    const text = readFileSync(join(ROOT, 'compose.yaml'), 'utf8');
    const block = text.slice(text.search(/^volumes:/m));
    expect([...block.matchAll(/^ {2}([a-z-]+):/gm)].map((m) => m[1]).sort()).toEqual([...COMPOSE_VOLUMES].sort());
  });

  it("are named, with the command that removes them; another installation's and today's are not", async () => {
    const names = await leftoverVolumes(docker, project);
    expect(names).toEqual([`${project}_api-keys`]);
    const check = leftoverCheck(names);
    expect(check).toMatchObject({ status: 'warn', fix: `docker volume rm ${project}_api-keys` });
    expect(check.detail).toContain(`${project}_api-keys`);
    expect(leftoverCheck(await leftoverVolumes(docker, `${project}none`))).toMatchObject({ status: 'ok' });
  });
});
