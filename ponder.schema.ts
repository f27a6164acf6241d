import { bigint, hex, index, integer, onchainTable, onchainView, primaryKey, sql, text } from "ponder";
import { zeroAddress } from "viem";

// Tables are written only by the indexing handlers in src/, so Ponder rolls them back on a reorg;
// views derive from them and follow. Money is the token's smallest unit (numeric, never float).
// Addresses are lowercase hex. Times are unix seconds; months are UTC calendar months "YYYY-MM".

/** One row per stablecoin Transfer log. */
export const transfer = onchainTable(
  "transfer",
  (t) => ({
    id: t.text().primaryKey(), // Ponder's event id: unique and ordered per log
    token: t.hex().notNull(),
    from: t.hex().notNull(),
    to: t.hex().notNull(),
    value: t.bigint().notNull(),
    blockNumber: t.bigint().notNull(),
    timestamp: t.bigint().notNull(),
    transactionHash: t.hex().notNull(),
    logIndex: t.integer().notNull(),
  }),
  // Covering indexes: a wallet's transfers of the last year are read from the index alone (an
  // index-only scan), not from heap pages scattered across the whole backfill.
  (table) => ({
    fromIdx: index().on(table.from, table.timestamp, table.to, table.token, table.value),
    toIdx: index().on(table.to, table.timestamp, table.from, table.token, table.value),
  }),
);

/**
 * The one aggregate the handlers maintain: money that moved from one wallet to another, per token
 * and UTC day (`day` = block timestamp / 86400, the unix day number). A transfer costs a single
 * upsert here; every per-wallet figure (monthly flows, balances, counterparties) is a sum over the
 * wallet's flow rows, which stay few (one per counterparty and active day) however many transfers
 * there were. `month` ("YYYY-MM") is the day's UTC month, kept so that the views and readers group
 * by it: a UTC day never crosses a UTC month. The key is by day, not by month, because Ponder can
 * predict `timestamp / 86400n` from the coming events and so, following the head, loads a block's
 * flow rows in one batched query instead of one lookup per transfer. See docs/data-model.md.
 */
export const flow = onchainTable(
  "flow",
  (t) => ({
    from: t.hex().notNull(),
    to: t.hex().notNull(),
    token: t.hex().notNull(),
    day: t.bigint().notNull(),
    month: t.text().notNull(),
    total: t.bigint().notNull(),
    transfers: t.integer().notNull(),
    firstAt: t.bigint().notNull(),
    lastAt: t.bigint().notNull(),
  }),
  // Covering indexes for both sides of a wallet: its flow rows come from the index alone. `month`
  // comes before `day` so that a wallet's rows are read in (counterparty, token, month) groups
  // (the funding trace's outflows: api/wallet/queries.ts); the day determines the month, so the
  // order is the same as by day.
  (table) => ({
    pk: primaryKey({ columns: [table.from, table.to, table.token, table.day] }),
    fromIdx: index().on(
      table.from,
      table.to,
      table.token,
      table.month,
      table.day,
      table.total,
      table.transfers,
      table.firstAt,
      table.lastAt,
    ),
    toIdx: index().on(
      table.to,
      table.from,
      table.token,
      table.month,
      table.day,
      table.total,
      table.transfers,
      table.firstAt,
      table.lastAt,
    ),
  }),
);

/**
 * Everything each wallet has ever received, across tokens: the figure the self-funding check
 * compares a funder's share against, one small row per wallet (docs/data-model.md says what this
 * third write per transfer costs the backfill).
 */
export const received = onchainTable("received", (t) => ({
  address: t.hex().primaryKey(),
  total: t.bigint().notNull(),
}));

/**
 * Running totals kept by the transfer handler, so that GET /api/stats reads a few rows instead of
 * aggregating every transfer: `transfers:<token>` (count, volume in the token's units) and
 * `wallets` (count of wallets seen, the zero address excluded; in tracked mode tracked ones only).
 */
export const indexTotal = onchainTable("index_total", (t) => ({
  key: t.text().primaryKey(),
  count: t.bigint().notNull(),
  volume: t.bigint().notNull(),
}));

/** Each wallet the `wallets` total has counted (a wallet is counted once, when first seen). */
export const walletSeen = onchainTable("wallet_seen", (t) => ({
  address: t.hex().primaryKey(),
}));

/**
 * Each EIP-3009 authorization the token has spent (AuthorizationUsed) or cancelled
 * (AuthorizationCanceled): a row exists exactly when the token's `authorizationState(authorizer,
 * nonce)` is true. Verification without RPC reads the nonce here. Kept for every authorizer, also in
 * tracked mode (a payer need not be a tracked wallet).
 */
export const authorizationState = onchainTable(
  "authorization_state",
  (t) => ({
    token: t.hex().notNull(),
    authorizer: t.hex().notNull(),
    nonce: t.hex().notNull(),
    kind: t.text().$type<"used" | "canceled">().notNull(),
    blockNumber: t.bigint().notNull(),
    transactionHash: t.hex().notNull(),
  }),
  (table) => ({
    pk: primaryKey({ columns: [table.token, table.authorizer, table.nonce] }),
  }),
);

/**
 * The wallets of tracked-wallets mode (INDEX_MODE=tracked), written at setup; empty when every
 * transfer is indexed. The views below list only these wallets when it is not empty.
 */
export const trackedWallet = onchainTable("tracked_wallet", (t) => ({
  address: t.hex().primaryKey(),
}));

/**
 * Each flow seen from both of its wallets: the sender's outflow and the recipient's inflow. The
 * zero address (mints, burns) is a counterparty, never a wallet of its own; in tracked mode only
 * tracked wallets are. A pair has one row per active day, so the views only sum, take extremes
 * and count distinct counterparties over these rows, never count the rows themselves.
 */
const sides = sql`
  select "from" as address, "to" as counterparty, token, month, 0::numeric(78,0) as inflow, total as outflow,
         0 as transfers_in, transfers as transfers_out, first_at, last_at from ${flow}
  union all
  select "to", "from", token, month, total, 0::numeric(78,0), transfers, 0, first_at, last_at from ${flow}`;
const notZero = sql`address <> ${sql.raw(`'${zeroAddress}'`)}
  and (not exists (select 1 from ${trackedWallet}) or address in (select address from ${trackedWallet}))`;

/** The counts and times every per-wallet view carries (fresh builders: drizzle names them per view). */
const countsAndTimes = () => ({
  transfersIn: integer().notNull(),
  transfersOut: integer().notNull(),
  firstAt: bigint().notNull(),
  lastAt: bigint().notNull(),
});
const countsAndTimesSql = sql`sum(transfers_in)::int as transfers_in, sum(transfers_out)::int as transfers_out,
         min(first_at) as first_at, max(last_at) as last_at`;

/** Per wallet, token and month: flows, counts and distinct counterparties. */
export const accountMonth = onchainView("account_month", {
  address: hex().notNull(),
  token: hex().notNull(),
  month: text().notNull(),
  inflow: bigint().notNull(),
  outflow: bigint().notNull(),
  ...countsAndTimes(),
  /** Distinct wallets this wallet moved money with, either way, that month. */
  counterparties: integer().notNull(),
  /** Distinct wallets that paid it that month. */
  payers: integer().notNull(),
  /** Distinct wallets it paid that month. */
  payees: integer().notNull(),
}).as(sql`
  select address, token, month, sum(inflow) as inflow, sum(outflow) as outflow, ${countsAndTimesSql},
         count(distinct counterparty)::int as counterparties,
         count(distinct counterparty) filter (where transfers_in > 0)::int as payers,
         count(distinct counterparty) filter (where transfers_out > 0)::int as payees
  from (${sides}) s where ${notZero} group by address, token, month`);

/** Per wallet and token: balance (all inflows less all outflows) and lifetime flows. */
export const balance = onchainView("balance", {
  address: hex().notNull(),
  token: hex().notNull(),
  balance: bigint().notNull(),
  totalIn: bigint().notNull(),
  totalOut: bigint().notNull(),
  ...countsAndTimes(),
}).as(sql`
  select address, token, sum(inflow) - sum(outflow) as balance, sum(inflow) as total_in, sum(outflow) as total_out,
         ${countsAndTimesSql}
  from (${sides}) s where ${notZero} group by address, token`);

/** Per wallet: first and last activity and counts, across tokens. */
export const account = onchainView("account", {
  address: hex().notNull(),
  ...countsAndTimes(),
}).as(sql`
  select address, ${countsAndTimesSql}
  from (${sides}) s where ${notZero} group by address`);

/** Per wallet, counterparty and token, seen from `address`: totals, counts and times each way. */
export const counterparty = onchainView("counterparty", {
  address: hex().notNull(),
  counterparty: hex().notNull(),
  token: hex().notNull(),
  totalIn: bigint().notNull(),
  totalOut: bigint().notNull(),
  ...countsAndTimes(),
  firstInAt: bigint(),
  lastInAt: bigint(),
  firstOutAt: bigint(),
  lastOutAt: bigint(),
}).as(sql`
  select address, counterparty, token, sum(inflow) as total_in, sum(outflow) as total_out, ${countsAndTimesSql},
         min(first_at) filter (where transfers_in > 0) as first_in_at, max(last_at) filter (where transfers_in > 0) as last_in_at,
         min(first_at) filter (where transfers_out > 0) as first_out_at, max(last_at) filter (where transfers_out > 0) as last_out_at
  from (${sides}) s where ${notZero} group by address, counterparty, token`);

/**
 * One row per passport (REP-…) attested by a reporter contract: our own and the reporter already
 * on Celo share the FinancialReportPublished event. Revocation, expiry and superseding come from
 * the events our reporter adds.
 */
export const report = onchainTable(
  "report",
  (t) => ({
    reporter: t.hex().notNull(), // contract that attested it
    reportId: t.text().notNull(),
    reportIdHash: t.hex().notNull(),
    wallet: t.hex().notNull(),
    buyer: t.hex().notNull(),
    reputationScore: t.integer().notNull(),
    financialHealthScore: t.integer().notNull(),
    loanCapacity: t.text().notNull(),
    reportHash: t.text().notNull(), // IPFS CID or content hash
    publishedAt: t.bigint().notNull(),
    blockNumber: t.bigint().notNull(),
    transactionHash: t.hex().notNull(),
    expiresAt: t.bigint(),
    revokedAt: t.bigint(),
    revocationReason: t.text(),
    supersedes: t.text(),
    supersededBy: t.text(),
  }),
  (table) => ({
    pk: primaryKey({ columns: [table.reporter, table.reportId] }),
    walletIdx: index().on(table.wallet, table.publishedAt),
    // Verify looks a passport up by its id alone (either reporter): without this, a scan of every row.
    reportIdIdx: index().on(table.reportId),
    hashIdx: index().on(table.reportHash),
    idHashIdx: index().on(table.reportIdHash),
  }),
);

/**
 * Each listing on the sanctions oracle (Chainalysis `SanctionsList`): a wallet added at a block and,
 * once removed, the block it was removed at. A wallet listed again after a removal gets a new row;
 * its current listing is the row without `delistedBlock`.
 */
export const sanctionsListing = onchainTable(
  "sanctions_listing",
  (t) => ({
    address: t.hex().notNull(),
    listedBlock: t.bigint().notNull(),
    listedAt: t.bigint().notNull(),
    listedTx: t.hex().notNull(),
    delistedBlock: t.bigint(),
    delistedAt: t.bigint(),
    delistedTx: t.hex(),
  }),
  (table) => ({ pk: primaryKey({ columns: [table.address, table.listedBlock] }) }),
);
