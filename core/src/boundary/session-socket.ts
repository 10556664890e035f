// One ZeroMQ ROUTER per agent session, each on its own unix socket in its own directory,
// so a container given that directory can reach nothing else. All session sockets share
// one ZeroMQ context of their own (one I/O thread), apart from the default context that
// carries the plugin-host link and the event bus: a session flooding its socket cannot
// slow the core's own traffic. (A context per session isolated sessions from each other
// a little better under a connection flood, but zeromq.js frees a context's threads only
// when it is garbage-collected, and in practice they accumulated: two threads per session
// ever opened. The guard's connection bound is what keeps a flood short.)
import { chmod, mkdir, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import * as zmq from 'zeromq';
import type { Admission, SessionGuard } from './session-guard.js';
import { SendQueue, type Frame } from './send-queue.js';
import { MAX_MESSAGE_BYTES } from './wire.js';

export type Reply = (frame: string) => Promise<void>;
/**
 * `reply` sends the answer (once; it ends the request's time in flight); `interim` sends
 * frames before it to the same caller (the "pending confirmation" keep-alives), never after.
 */
export type FrameHandler = (frames: Buffer[], reply: Reply, interim: Reply) => void;
/** The answer to a frame the guard refused: must stay cheap, it is not budgeted. */
export type Refusal = (frames: Buffer[], admission: Extract<Admission, { ok: false }>) => string;

const SESSION_CONTEXT = new zmq.Context({ ioThreads: 1 });

/** Frames libzmq holds per connection while the core has not read them. */
const RECEIVE_HIGH_WATER_MARK = 4;

export class SessionSocket {
  private readonly router: zmq.Router;
  private readonly queue: SendQueue;
  private loop: Promise<void> = Promise.resolve();
  private watching: Promise<void> = Promise.resolve();

  constructor(
    readonly socketPath: string,
    private readonly guard: SessionGuard,
  ) {
    const { reply_high_water_mark, reply_timeout_ms } = guard.limits;
    this.router = new zmq.Router({
      context: SESSION_CONTEXT,
      linger: 0,
      mandatory: true,
      heartbeatInterval: 5000,
      heartbeatTimeout: 15000,
      // Slightly above the 1 MB request limit so oversized requests still get a structured
      // error; larger frames are dropped by libzmq (and the peer disconnected) before
      // they cost memory. With the receive mark this bounds what libzmq holds per connection.
      maxMessageSize: MAX_MESSAGE_BYTES + 64 * 1024,
      receiveHighWaterMark: RECEIVE_HIGH_WATER_MARK,
      // A peer that does not read fills its pipe; the send then times out instead of
      // queueing replies in the core without end.
      sendHighWaterMark: reply_high_water_mark,
      sendTimeout: reply_timeout_ms,
    });
    this.queue = new SendQueue((frames) => this.router.send(frames));
  }

  async open(onFrames: FrameHandler, refuse: Refusal): Promise<void> {
    const dir = dirname(this.socketPath);
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await chmod(dir, 0o755);
    // Counted from the first accept: the observer must exist before the socket listens.
    this.watching = this.watch(this.router.events);
    await this.router.bind(`ipc://${this.socketPath}`);
    // The agent runs as a different, unprivileged user: it must be able to connect.
    await chmod(this.socketPath, 0o666);
    this.loop = this.receive(onFrames, refuse);
  }

  /**
   * Connections in and out, for the guard's count. A receive loop rather than the
   * observer's event-emitter mode, which requires 'events' lazily, once per process.
   */
  private async watch(events: zmq.Observer): Promise<void> {
    try {
      while (!events.closed) {
        const event = await events.receive();
        if (event.type === 'accept') this.guard.connected();
        else if (event.type === 'disconnect') this.guard.disconnected();
      }
    } catch {
      // The observer closes with the socket.
    }
  }

  private async receive(onFrames: FrameHandler, refuse: Refusal): Promise<void> {
    try {
      for await (const [identity, ...frames] of this.router) {
        if (this.guard.tripped) continue; // being closed: nothing more is processed
        let bytes = 0;
        for (const f of frames) bytes += f.length;
        const admission = this.guard.admit(bytes);
        if (!admission.ok) {
          if (!this.guard.tripped) void this.send([identity, refuse(frames, admission)]);
          continue;
        }
        let settled = false;
        const reply: Reply = (frame) => {
          if (settled) return Promise.resolve();
          settled = true;
          return this.send([identity, frame]).finally(() => this.guard.settled());
        };
        // Its failure is the caller's to see: a peer that is gone is a caller that is gone.
        const interim: Reply = (frame) => (settled ? Promise.resolve() : this.queue.push([identity, frame]));
        onFrames(frames, reply, interim);
      }
    } catch (err) {
      // Closing the socket ends the loop; anything else is unexpected but must not crash the core.
      if (!this.router.closed) throw err;
    }
  }

  /** Queues a reply; one that cannot be queued in time means the peer does not read. */
  private async send(frames: Frame[]): Promise<void> {
    try {
      await this.queue.push(frames);
    } catch (err) {
      // EHOSTUNREACH: the peer has gone (ipc timed out, or exited); nothing to do.
      if ((err as { code?: string }).code === 'EAGAIN' && !this.router.closed) this.guard.replyStalled();
    }
  }

  async close(): Promise<void> {
    this.router.close(); // its event observer goes with it
    await this.loop.catch(() => undefined);
    await this.watching;
    await rm(dirname(this.socketPath), { recursive: true, force: true });
  }
}
