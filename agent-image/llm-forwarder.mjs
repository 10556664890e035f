// Inside the agent container (no network): gives Claude Code a loopback
// ANTHROPIC_BASE_URL by piping 127.0.0.1:$CARAPACE_LLM_PORT to the core's per-session
// LLM proxy socket. It carries no credential of its own.
import { createConnection, createServer } from 'node:net';

const socketPath = process.env.CARAPACE_LLM_SOCKET || '/run/carapace/llm.sock';
const port = Number(process.env.CARAPACE_LLM_PORT || 8089);

createServer((client) => {
  const upstream = createConnection(socketPath);
  client.pipe(upstream).pipe(client);
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close);
  upstream.on('error', close);
}).listen(port, '127.0.0.1');
