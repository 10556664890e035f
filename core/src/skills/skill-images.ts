// The image a skill runs in: the default sandbox image, or, for a skill with a Dockerfile,
// one the core builds from its folder, tagged by the folder's content hash
// (carapace-skill-<name>:<hash>) and kept: a later start with the same folder finds it and
// builds nothing. A build is bounded in time, one at a time per tag, and its failure is an
// error value with the engine's last words. The folder is read again for the build and
// must still hash the same (an edit after the core started waits for a restart).
import type Docker from 'dockerode';
import tar from 'tar-stream';
import type { Logger } from 'pino';
import { ToolFailure } from '../protocol/errors.js';
import { hashOf, walk, type Skill } from './skill-discovery.js';

const BUILD_MS = 10 * 60_000;

export function skillImageTag(skill: Pick<Skill, 'manifest' | 'contentHash'>): string {
  return `carapace-skill-${skill.manifest.name}:${skill.contentHash.slice(0, 16)}`;
}

function imageFailure(message: string, detail?: string): ToolFailure {
  return new ToolFailure({ code: 'SKILL_IMAGE_FAILED', message, retriable: false, stage: 6 }, detail);
}

export class SkillImages {
  private readonly building = new Map<string, Promise<string | ToolFailure>>();

  constructor(private readonly docker: Docker, private readonly defaultImage: string, private readonly log: Logger) {}

  /** The skill's image, built first if it has a Dockerfile and no image of its hash exists yet. */
  async imageFor(skill: Skill): Promise<string | ToolFailure> {
    if (!skill.dockerfile) return this.defaultImage;
    const tag = skillImageTag(skill);
    if (await this.docker.getImage(tag).inspect().then(() => true, () => false)) return tag;
    let pending = this.building.get(tag);
    if (!pending) {
      pending = this.build(skill, tag).finally(() => this.building.delete(tag));
      this.building.set(tag, pending);
    }
    return pending;
  }

  private async build(skill: Skill, tag: string): Promise<string | ToolFailure> {
    const walked = walk(skill.dir);
    if ('problem' in walked) return imageFailure(`skill ${skill.manifest.name}: ${walked.problem}`);
    if (hashOf(walked.files) !== skill.contentHash) return imageFailure(`skill ${skill.manifest.name} changed since the core started: its image is built after a restart`);
    const pack = tar.pack();
    for (const f of walked.files) pack.entry({ name: f.rel, mode: f.mode, size: f.bytes.length }, f.bytes);
    pack.finalize();
    this.log.info({ skill: skill.manifest.name, tag }, 'building a skill image');
    const started = Date.now();
    try {
      const stream = await this.docker.buildImage(pack as unknown as NodeJS.ReadableStream, { t: tag, rm: true, forcerm: true, labels: { 'carapace.skill': skill.manifest.name } });
      const last = await new Promise<string | null>((resolve, reject) => {
        let error: string | null = null;
        const timer = setTimeout(() => {
          (stream as NodeJS.ReadableStream & { destroy?(): void }).destroy?.();
          reject(new Error(`not built within ${BUILD_MS / 60_000} minutes`));
        }, BUILD_MS);
        this.docker.modem.followProgress(stream, (err: Error | null) => {
          clearTimeout(timer);
          if (err) reject(err);
          else resolve(error);
        }, (event: { error?: string }) => {
          if (event.error) error = event.error;
        });
      });
      if (last !== null) return imageFailure(`skill ${skill.manifest.name}: its Dockerfile did not build`, last.slice(0, 2000));
    } catch (err) {
      return imageFailure(`skill ${skill.manifest.name}: its image could not be built`, (err as Error).message);
    }
    this.log.info({ skill: skill.manifest.name, tag, ms: Date.now() - started }, 'built a skill image');
    return tag;
  }
}
