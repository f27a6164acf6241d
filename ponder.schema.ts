import { index, onchainTable, primaryKey } from "ponder";

// Everything here is written only by the indexing handlers in src/, so Ponder can roll every
// table back on a reorg. Money is the token's smallest unit (numeric, never float). Addresses are
// lowercase hex. Times are unix seconds; months are UTC calendar months written "YYYY-MM".

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
  (table) => ({
    fromIdx: index().on(table.from, table.timestamp),
    toIdx: index().on(table.to, table.timestamp),
  }),
);

/** One row per wallet: lifetime activity across all indexed tokens. */
export const account = onchainTable("account", (t) => ({
  address: t.hex().primaryKey(),
  firstAt: t.bigint().notNull(),
  lastAt: t.bigint().notNull(),
  firstBlock: t.bigint().notNull(),
  lastBlock: t.bigint().notNull(),
  transfersIn: t.integer().notNull(),
  transfersOut: t.integer().notNull(),
}));

/** One row per wallet and token: the running balance and lifetime flows. */
export const balance = onchainTable(
  "balance",
  (t) => ({
    address: t.hex().notNull(),
    token: t.hex().notNull(),
    balance: t.bigint().notNull(),
    totalIn: t.bigint().notNull(),
    totalOut: t.bigint().notNull(),
    transfersIn: t.integer().notNull(),
    transfersOut: t.integer().notNull(),
    firstAt: t.bigint().notNull(),
    lastAt: t.bigint().notNull(),
  }),
  (table) => ({ pk: primaryKey({ columns: [table.address, table.token] }) }),
);

/** One row per wallet, token and UTC calendar month. */
export const accountMonth = onchainTable(
  "account_month",
  (t) => ({
    address: t.hex().notNull(),
    token: t.hex().notNull(),
    month: t.text().notNull(), // "YYYY-MM"
    inflow: t.bigint().notNull(),
    outflow: t.bigint().notNull(),
    transfersIn: t.integer().notNull(),
    transfersOut: t.integer().notNull(),
    /** Distinct wallets this wallet moved money with (either way) this month. */
    counterparties: t.integer().notNull(),
    /** Distinct wallets that paid this wallet this month. */
    payers: t.integer().notNull(),
    /** Distinct wallets this wallet paid this month. */
    payees: t.integer().notNull(),
    /** Balance of this token at the end of the month (after its last transfer). */
    closingBalance: t.bigint().notNull(),
  }),
  (table) => ({ pk: primaryKey({ columns: [table.address, table.token, table.month] }) }),
);

/**
 * One row per wallet, counterparty and token, seen from `address`: "in" is money the counterparty
 * sent to `address`, "out" is money `address` sent to it. Each transfer touches two rows, one
 * from each side.
 */
export const counterparty = onchainTable(
  "counterparty",
  (t) => ({
    address: t.hex().notNull(),
    counterparty: t.hex().notNull(),
    token: t.hex().notNull(),
    totalIn: t.bigint().notNull(),
    totalOut: t.bigint().notNull(),
    transfersIn: t.integer().notNull(),
    transfersOut: t.integer().notNull(),
    firstAt: t.bigint().notNull(),
    lastAt: t.bigint().notNull(),
    firstInAt: t.bigint(),
    lastInAt: t.bigint(),
    firstOutAt: t.bigint(),
    lastOutAt: t.bigint(),
  }),
  (table) => ({ pk: primaryKey({ columns: [table.address, table.counterparty, table.token] }) }),
);

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
    hashIdx: index().on(table.reportHash),
    idHashIdx: index().on(table.reportIdHash),
  }),
);
