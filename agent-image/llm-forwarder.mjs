// API mode, inside the agent container: gives Claude Code a loopback ANTHROPIC_BASE_URL
// by piping 127.0.0.1:$CARAPACE_LLM_PORT to the core's per-session LLM proxy socket. It
// carries no credential of its own. (Legacy mode needs no forwarder: Claude Code speaks
// to that socket itself, via ANTHROPIC_UNIX_SOCKET.)
import { createConnection, createServer } from 'node:net';

const socketPath = process.env.CARAPACE_LLM_SOCKET || '/run/carapace/llm.sock';
const port = Number(process.env.CARAPACE_LLM_PORT || 8089);

// noDelay: a streamed answer is many small writes; Nagle would hold each one back until
// the previous one is acknowledged.
createServer({ noDelay: true }, (client) => {
  const upstream = createConnection(socketPath);
  client.pipe(upstream).pipe(client);
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close);
  upstream.on('error', close);
}).listen(port, '127.0.0.1');
