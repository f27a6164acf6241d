import type { Address } from "../../config/addresses.ts";
import { arrayParam, type IndexDb, queryPrepared } from "../db.ts";
import type { SanctionsFacts } from "../scoring/facts.ts";
import { windowStart } from "../stats/queries.ts";

// Reads of the sanctions_listing table (src/SanctionsList.ts writes it). It holds a few thousand rows
// at most, so each read is a handful of index probes.

/** Each wallet's listing state and its exposure: currently listed wallets it moved money with directly over the `windowDays` before the indexed head. */
export async function sanctionsOf(
  db: IndexDb,
  schema: string,
  addresses: readonly Address[],
  windowDays: number,
  complete: boolean,
): Promise<Map<Address, SanctionsFacts>> {
  const since = windowStart(schema, "$2");
  const [listings, exposure] = await Promise.all([
    queryPrepared<{
      address: Address;
      listed_block: string;
      listed_at: string;
      delisted_block: string | null;
      delisted_at: string | null;
    }>(
      db,
      `sanctions_listings:${schema}`,
      `select address, listed_block::text, listed_at::text, delisted_block::text, delisted_at::text
       from "${schema}".sanctions_listing where address = any(${arrayParam(1, "text")}) order by listed_block`,
      [addresses],
    ),
    // From the wallet's own flow rows (both covering indexes), each counterparty probed in the listing's key.
    queryPrepared<{ wallet: Address; listed: Address; transfers: number; total: string; last_at: string }>(
      db,
      `sanctions_exposure:${schema}`,
      `select w.address as wallet, f.counterparty as listed, sum(f.transfers)::int as transfers,
              sum(f.total)::text as total, max(f.last_at)::text as last_at
       from unnest(${arrayParam(1, "text")}) as w(address)
       cross join lateral (
         select "to" as counterparty, transfers, total, last_at from "${schema}".flow where "from" = w.address and last_at > ${since}
         union all
         select "from", transfers, total, last_at from "${schema}".flow where "to" = w.address and last_at > ${since}
       ) f
       where f.counterparty <> w.address and exists (
         select 1 from "${schema}".sanctions_listing s where s.address = f.counterparty and s.delisted_block is null)
       group by w.address, f.counterparty`,
      [addresses, windowDays],
    ),
  ]);
  const facts = new Map<Address, SanctionsFacts>(
    addresses.map((a) => [a, { complete, listed: null, delisted: null, exposure: [] }]),
  );
  for (const row of listings) {
    const f = facts.get(row.address)!;
    if (row.delisted_block === null) f.listed = { block: Number(row.listed_block), at: Number(row.listed_at) };
    else f.delisted = { block: Number(row.delisted_block), at: Number(row.delisted_at) };
  }
  for (const row of exposure)
    facts.get(row.wallet)!.exposure.push({
      wallet: row.listed,
      transfers: row.transfers,
      units: BigInt(row.total),
      lastAt: Number(row.last_at),
    });
  return facts;
}

/**
 * Changes whenever a listing is added or removed: part of every cached assessment's key, since a
 * listing changes a wallet's answer without any transfer of its own.
 */
export async function sanctionsVersion(db: IndexDb, schema: string): Promise<string> {
  const [row] = await queryPrepared<{ version: string }>(
    db,
    `sanctions_version:${schema}`,
    `select count(*)::text || ':' || coalesce(max(greatest(listed_block, coalesce(delisted_block, 0))), 0)::text as version
     from "${schema}".sanctions_listing`,
    [],
  );
  return row!.version;
}

/** Whether `wallet` is listed now, as far as the index knows (a payer's check: one primary-key range probe). */
export async function isListed(db: IndexDb, schema: string, wallet: Address): Promise<boolean> {
  const rows = await queryPrepared<{ one: number }>(
    db,
    `sanctions_is_listed:${schema}`,
    `select 1 as one from "${schema}".sanctions_listing where address = $1 and delisted_block is null limit 1`,
    [wallet],
  );
  return rows.length > 0;
}
