// The plugin's one sender checker: the DNS-over-HTTPS resolver (its cache shared by every
// mail) and the verdicts already reached, by mail (folder, UIDVALIDITY, UID: a mail's bytes
// never change under one UID), so that a search or a read does not check again what the
// watcher checked. Only final verdicts are kept; a temporary one is asked again.
import { dohResolver, type Resolver } from './dns-over-https.js';
import { verifySenderOf, type SenderVerdict } from './sender-auth.js';

/** Verdicts remembered (oldest forgotten first). */
const KEPT = 5000;

export class SenderChecks {
  private readonly known = new Map<string, SenderVerdict>();
  readonly resolver: Resolver;

  constructor(resolverUrl: string, resolver?: Resolver) {
    this.resolver = resolver ?? dohResolver({ url: resolverUrl });
  }

  /** The verdict on `source` for its From `from`; `mail` names it for the cache (null: not kept). */
  async verdict(mail: { folder: string; uidvalidity: string; uid: number } | null, source: Buffer, from: string): Promise<SenderVerdict> {
    const key = mail ? `${mail.uidvalidity} ${mail.uid} ${mail.folder}` : null;
    const known = key === null ? undefined : this.known.get(key);
    if (known) return known;
    const verdict = await verifySenderOf(source, from, this.resolver);
    if (key !== null && verdict.kind !== 'temporary') {
      this.known.set(key, verdict);
      while (this.known.size > KEPT) this.known.delete(this.known.keys().next().value as string);
    }
    return verdict;
  }
}
