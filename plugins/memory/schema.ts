// The schema of one group's memory database and its forward-only migrations, tracked in
// PRAGMA user_version. Version 1 is the specification's schema, verbatim; later versions
// only ever add. A database newer than this code is refused, never touched.
import type Database from 'better-sqlite3';

/** The FTS5 table and the triggers that keep it in step with memory_entries. */
function ftsSchema(tokenize: string | null, updateOf: string): string {
  return `
CREATE VIRTUAL TABLE memory_fts USING fts5(
    content,
    tags,
    content=memory_entries,
    content_rowid=rowid${tokenize ? `,\n    tokenize='${tokenize}'` : ''}
);

CREATE TRIGGER memory_fts_insert AFTER INSERT ON memory_entries
BEGIN
    INSERT INTO memory_fts(rowid, content, tags)
    VALUES (new.rowid, new.content, new.tags);
END;

CREATE TRIGGER memory_fts_delete AFTER DELETE ON memory_entries
BEGIN
    INSERT INTO memory_fts(memory_fts, rowid, content, tags)
    VALUES ('delete', old.rowid, old.content, old.tags);
END;

CREATE TRIGGER memory_fts_update AFTER UPDATE${updateOf} ON memory_entries
BEGIN
    INSERT INTO memory_fts(memory_fts, rowid, content, tags)
    VALUES ('delete', old.rowid, old.content, old.tags);
    INSERT INTO memory_fts(rowid, content, tags)
    VALUES (new.rowid, new.content, new.tags);
END;
`;
}

/** Version 1: the specification's schema. */
export const SCHEMA_V1 = `
CREATE TABLE memory_entries (
    id          TEXT PRIMARY KEY,
    type        TEXT NOT NULL CHECK(type IN (
                    'preference', 'fact', 'instruction',
                    'context', 'correction'
                )),
    content     TEXT NOT NULL,
    tags        TEXT NOT NULL DEFAULT '[]',
    behavioral  INTEGER NOT NULL DEFAULT 0,
    superseded_by TEXT REFERENCES memory_entries(id),
    session_id  TEXT NOT NULL,
    group_name  TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
${ftsSchema(null, '')}
CREATE INDEX idx_memory_type ON memory_entries(type);
CREATE INDEX idx_memory_behavioral ON memory_entries(behavioral);
CREATE INDEX idx_memory_superseded ON memory_entries(superseded_by);
CREATE INDEX idx_memory_created ON memory_entries(created_at);
`;

/**
 * Version 2:
 * - created_at is normalised to one ISO 8601 form (milliseconds, Z), so text order is time order;
 * - provenance gains the request's correlation id (to find the write in the audit log);
 * - superseded_at records when an entry was replaced, so the purge counts age from
 *   supersession rather than creation (back-filled from the replacing entry's created_at);
 * - indexes in the orders reads use: current entries by (behavioral, created_at) for the
 *   brief, and (type, created_at) for the most recent entries of a type;
 * - full-text search with Porter stemming ("prefers" finds "preference"), rebuilt from the
 *   table; the update trigger fires only when indexed columns change.
 */
const SCHEMA_V2 = `
DROP TRIGGER memory_fts_insert;
DROP TRIGGER memory_fts_delete;
DROP TRIGGER memory_fts_update;
DROP TABLE memory_fts;

ALTER TABLE memory_entries ADD COLUMN correlation TEXT;
ALTER TABLE memory_entries ADD COLUMN superseded_at TEXT;
UPDATE memory_entries
   SET created_at = COALESCE(strftime('%Y-%m-%dT%H:%M:%fZ', created_at), created_at);
UPDATE memory_entries
   SET superseded_at = COALESCE(
         (SELECT n.created_at FROM memory_entries n WHERE n.id = memory_entries.superseded_by),
         created_at)
 WHERE superseded_by IS NOT NULL;

CREATE INDEX idx_memory_current ON memory_entries(behavioral, created_at) WHERE superseded_by IS NULL;
CREATE INDEX idx_memory_type_created ON memory_entries(type, created_at);
CREATE INDEX idx_memory_superseded_at ON memory_entries(superseded_at) WHERE superseded_by IS NOT NULL;
${ftsSchema('porter unicode61', ' OF content, tags')}
INSERT INTO memory_fts(memory_fts) VALUES ('rebuild');
`;

/**
 * Version 3: an entry remembers whether the session that stored it had read external
 * content (a mail, a web page): such an entry is shown as external in every brief, and a
 * session whose brief holds one counts as having read external content (DESIGN 16).
 * Entries from before cannot be told apart and stay unlabelled.
 */
const SCHEMA_V3 = `
ALTER TABLE memory_entries ADD COLUMN external INTEGER NOT NULL DEFAULT 0;
`;

/** MIGRATIONS[i] takes a database from version i to version i + 1. */
const MIGRATIONS: readonly string[] = [SCHEMA_V1, SCHEMA_V2, SCHEMA_V3];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** The database was written by a newer Carapace: refuse it rather than risk corrupting it. */
export class SchemaTooNewError extends Error {
  constructor(
    readonly found: number,
    readonly known: number,
  ) {
    super(`schema version ${found} is newer than the ${known} this version of the memory plugin knows`);
    this.name = 'SchemaTooNewError';
  }
}

export function schemaVersion(db: Database.Database): number {
  return db.pragma('user_version', { simple: true }) as number;
}

/**
 * Brings the database up to SCHEMA_VERSION, one version per transaction (the version is
 * re-read inside each, so two openers never apply a step twice). Returns the version found.
 */
export function migrate(db: Database.Database): number {
  const found = schemaVersion(db);
  const step = db.transaction((): boolean => {
    const version = schemaVersion(db);
    if (version > SCHEMA_VERSION) throw new SchemaTooNewError(version, SCHEMA_VERSION);
    if (version === SCHEMA_VERSION) return false;
    db.exec(MIGRATIONS[version]);
    db.pragma(`user_version = ${version + 1}`);
    return true;
  });
  while (step.immediate()) {
    // one migration per transaction
  }
  return found;
}
