// One ZeroMQ ROUTER per agent session, each on its own unix socket in its own directory,
// so a container given that directory can reach nothing else.
import { chmod, mkdir, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import * as zmq from 'zeromq';
import { SendQueue } from './send-queue.js';

export type Reply = (frame: Buffer) => Promise<void>;
export type FrameHandler = (frames: Buffer[], reply: Reply) => void;

export class SessionSocket {
  private readonly router = new zmq.Router({
    linger: 0,
    mandatory: true,
    heartbeatInterval: 5000,
    heartbeatTimeout: 15000,
    // Above the 1 MB request limit so oversized requests still get a structured error;
    // far larger frames are dropped by libzmq before they cost memory.
    maxMessageSize: 4 * 1024 * 1024,
  });
  private readonly queue = new SendQueue((frames) => this.router.send(frames));
  private loop: Promise<void> = Promise.resolve();

  constructor(readonly socketPath: string) {}

  async open(onFrames: FrameHandler): Promise<void> {
    const dir = dirname(this.socketPath);
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await chmod(dir, 0o755);
    await this.router.bind(`ipc://${this.socketPath}`);
    // The agent runs as a different, unprivileged user: it must be able to connect.
    await chmod(this.socketPath, 0o666);
    this.loop = this.receive(onFrames);
  }

  private async receive(onFrames: FrameHandler): Promise<void> {
    try {
      for await (const [identity, ...frames] of this.router) {
        const reply: Reply = (frame) => this.queue.push([identity, frame]);
        onFrames(frames, reply);
      }
    } catch (err) {
      // Closing the socket ends the loop; anything else is unexpected but must not crash the core.
      if (!this.router.closed) throw err;
    }
  }

  async close(): Promise<void> {
    this.router.close();
    await this.loop.catch(() => undefined);
    await rm(dirname(this.socketPath), { recursive: true, force: true });
  }
}
