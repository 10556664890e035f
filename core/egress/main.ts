// The egress service's process (compose.yaml's `egress`).
import { log, serveEgress } from './egress.js';

const path = process.env.CARAPACE_EGRESS_SOCKET || '/run/carapace-egress/egress.sock';
serveEgress(path).then(
  () => log.info({ socket: path }, 'egress ready'),
  (err: unknown) => {
    log.fatal({ err }, 'egress could not start');
    process.exit(1);
  },
);
process.once('SIGTERM', () => process.exit(0));
