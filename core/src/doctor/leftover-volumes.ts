// Volumes an earlier version's compose.yaml declared and today's does not (`api-keys`,
// since renamed `api-sockets`): Compose never removes a volume, so the doctor names what an
// upgrade left behind and how to remove it. Only this installation's (its Compose project).
import type Docker from 'dockerode';
import type { Check } from './checks.js';

/** compose.yaml's volumes today (a unit test holds this to the file). */
export const COMPOSE_VOLUMES: readonly string[] = ['sockets', 'api-sockets', 'egress'];

/** The project's volumes that compose.yaml no longer declares, by their engine names. */
export async function leftoverVolumes(docker: Docker, project: string): Promise<string[]> {
  const { Volumes } = await docker.listVolumes({ filters: JSON.stringify({ label: [`com.docker.compose.project=${project}`] }) } as unknown as Docker.VolumeListOptions);
  return (Volumes ?? [])
    .filter((v) => !COMPOSE_VOLUMES.includes(v.Labels?.['com.docker.compose.volume'] ?? ''))
    .map((v) => v.Name)
    .sort();
}

export function leftoverCheck(names: string[]): Check {
  const base = { id: 'leftover-volumes', title: 'Volumes from earlier versions' };
  if (names.length === 0) return { ...base, status: 'ok', detail: 'None: every volume of this installation is one it uses.' };
  return {
    ...base,
    status: 'warn',
    detail: `${names.length === 1 ? 'A volume' : `${names.length} volumes`} an earlier version used, no longer used: ${names.join(', ')}. They hold nothing this version reads.`,
    fix: `docker volume rm ${names.join(' ')}`,
  };
}
