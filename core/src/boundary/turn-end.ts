// The end of this turn of the event loop, in two steps, from one immediate: first what
// the turn produced for a peer (a batch of messages on the plugin host link), then what it
// produced for the disk (the audit log's lines). A request on its way to its handler does
// not wait for pino and the file (tens of microseconds), and the audit file still gets a
// turn's lines at the end of that same turn: a kill -9 loses at most the lines of the turn
// it strikes, as since the audit log first wrote once per turn.
type Task = () => void;

let sends: Task[] = [];
let writes: Task[] = [];
let scheduled = false;

function run(): void {
  scheduled = false;
  const s = sends;
  const w = writes;
  sends = [];
  writes = [];
  for (const task of s) task();
  for (const task of w) task();
}

/** `task` runs at the end of this turn: `send` before `write`. */
export function atTurnEnd(step: 'send' | 'write', task: Task): void {
  (step === 'send' ? sends : writes).push(task);
  if (!scheduled) {
    scheduled = true;
    setImmediate(run);
  }
}
