// A container that holds nothing but an agent's workspace, to read the agent's files from.
// The engine's archive API reads as root and resolves links inside the container it reads:
// in the agent's own container a folder link swapped in at the right moment could lead it
// to a file of the agent image that the agent cannot read itself. Here every path, link or
// not, ends in an empty image (FROM scratch) or in the workspace, mounted read-only. The
// container is created and never started: nothing runs in it, under any runtime.
import type Docker from 'dockerode';
import tar from 'tar-stream';
import { WORKSPACE } from '../files/attach-files.js';
import { LABELS } from './runtime.js';

const READER_IMAGE = 'carapace-reader:1';
const ROLE_LABEL = 'carapace.role';

let building: Promise<void> | null = null;

/** The empty image (no layers, no files), built from a two-line Dockerfile when the engine lacks it (first use, or pruned). */
async function readerImage(docker: Docker): Promise<void> {
  if (await docker.getImage(READER_IMAGE).inspect().then(() => true, () => false)) return;
  building ??= (async () => {
    const dockerfile = Buffer.from(`FROM scratch\nLABEL ${ROLE_LABEL}=reader\n`);
    const pack = tar.pack();
    pack.entry({ name: 'Dockerfile', size: dockerfile.length }, dockerfile);
    pack.finalize();
    const stream = await docker.buildImage(pack as unknown as NodeJS.ReadableStream, { t: READER_IMAGE, rm: true, forcerm: true });
    await new Promise<void>((resolve, reject) => {
      let failed: string | null = null;
      docker.modem.followProgress(stream, (err: Error | null) => (err || failed ? reject(err ?? new Error(failed!)) : resolve()), (event: { error?: string }) => {
        if (event.error) failed = event.error;
      });
    });
  })().finally(() => (building = null));
  return building;
}

/** The agent's workspace mount as a Binds entry, read-only; null when it has none. */
function workspaceBind(info: Docker.ContainerInspectInfo): string | null {
  const mount = info.Mounts.find((m) => m.Destination === WORKSPACE);
  if (!mount) return null;
  return mount.Type === 'volume' && mount.Name ? `${mount.Name}:${WORKSPACE}:ro,nocopy` : `${mount.Source}:${WORKSPACE}:ro`;
}

/**
 * Calls `use` with a reader of the agent container `agentId`'s workspace (same path) and
 * removes the reader after. Throws when the agent or its workspace is gone.
 */
export async function withWorkspaceReader<T>(docker: Docker, agentId: string, use: (reader: Docker.Container) => Promise<T>): Promise<T> {
  const [info] = await Promise.all([docker.getContainer(agentId).inspect(), readerImage(docker)]);
  const bind = workspaceBind(info);
  if (!bind) throw new Error('the agent has no workspace mounted');
  const labels = { [LABELS.managed]: 'true', [LABELS.instance]: info.Config.Labels?.[LABELS.instance] ?? '', [ROLE_LABEL]: 'reader' };
  return withUnstartedContainer(docker, { image: READER_IMAGE, binds: [bind], labels }, use);
}

/** A container with `binds`, created and never started, for the engine's archive API; removed after `use`. */
export async function withUnstartedContainer<T>(docker: Docker, spec: { image: string; binds: string[]; labels: Record<string, string> }, use: (container: Docker.Container) => Promise<T>): Promise<T> {
  const container = await docker.createContainer({
    Image: spec.image,
    Entrypoint: ['none'],
    NetworkDisabled: true,
    Labels: spec.labels,
    HostConfig: { Binds: spec.binds, NetworkMode: 'none', ReadonlyRootfs: true, CapDrop: ['ALL'] },
  });
  try {
    return await use(container);
  } finally {
    await container.remove({ force: true }).catch(() => undefined);
  }
}
