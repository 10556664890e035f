// The engine's stat of a path in a container (HEAD on its archive API): what the engine
// itself would find there, its last part not followed. Nothing runs in the container.
import type Docker from 'dockerode';

export interface EnginePathStat {
  /** Go's os.FileMode: permission bits and type bits (a link is bit 27). */
  mode: number;
  size: number;
  mtime: string;
  /** Set when the path is a symbolic link. */
  linkTarget?: string;
}

/** The stat, or null where there is nothing (404); any other failure of the engine throws. */
export async function enginePathStat(container: Docker.Container, path: string): Promise<EnginePathStat | null> {
  const res = (await container.infoArchive({ path }).catch((err: { statusCode?: number }) => {
    if (err.statusCode === 404) return null;
    throw err;
  })) as { headers?: Record<string, string | undefined> } | null;
  const header = res?.headers?.['x-docker-container-path-stat'];
  return header ? (JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as EnginePathStat) : null;
}
