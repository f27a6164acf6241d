import { readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import type { ServiceStoreLocation } from "../../api/store/store.ts";

/** Where a service keeps its IPFS blocks: files under IPFS_DIR (PGlite) or `service.ipfs_block` (Postgres). */
export type BlockLocation = { kind: "fs"; directory: string } | { kind: "postgres"; connectionString: string };

export function blockLocation(store: ServiceStoreLocation, ipfsDirectory: string): BlockLocation {
  return store.kind === "postgres" ? store : { kind: "fs", directory: ipfsDirectory };
}

export type StoredBlock = { bytes: Buffer; overwrite: (bytes: Buffer) => Promise<void> };

/**
 * The stored block whose bytes contain `part`, to forge and restore in place. A file keeps its
 * access and modification times, so only the bytes tell. PGlite's files are read while the service
 * runs (it does not lock them); Postgres is read through a connection of its own.
 */
export async function storedBlock(
  location: BlockLocation,
  part: string | Uint8Array,
): Promise<StoredBlock | undefined> {
  const needle = Buffer.from(part);
  if (location.kind === "fs") {
    const files = readdirSync(join(location.directory, "blocks"), { recursive: true, withFileTypes: true }).filter(
      (f) => f.isFile(),
    );
    const file = files.map((f) => join(f.parentPath, f.name)).find((f) => readFileSync(f).includes(needle));
    if (!file) return undefined;
    return {
      bytes: readFileSync(file),
      overwrite: async (bytes) => {
        const { atime, mtime } = statSync(file);
        writeFileSync(file, bytes);
        utimesSync(file, atime, mtime);
      },
    };
  }
  const query = async <T extends pg.QueryResultRow>(sql: string, params: unknown[]) => {
    const client = new pg.Client({ connectionString: location.connectionString });
    await client.connect();
    try {
      return (await client.query<T>(sql, params)).rows;
    } finally {
      await client.end();
    }
  };
  const [row] = await query<{ cid: string; bytes: Buffer }>(
    `select cid, bytes from service.ipfs_block where position($1::bytea in bytes) > 0 limit 1`,
    [needle],
  );
  if (!row) return undefined;
  return {
    bytes: row.bytes,
    overwrite: async (bytes) =>
      void (await query(`update service.ipfs_block set bytes = $2 where cid = $1`, [row.cid, bytes])),
  };
}
