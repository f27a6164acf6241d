import { and, eq, gt, inArray, or, type SQL, sql } from "drizzle-orm";
import type { Address } from "../../../../config/addresses.ts";
import { queryPrepared } from "../../../db.ts";
import { coalesced } from "../../../store/coalesce.ts";
import { type PaymentRow, payment, settlementTransaction } from "../../../store/schema.ts";
import { CLEARED_ON_RECLAIM, RERUN_MARK } from "../../lifecycle.ts";
import {
  type ClaimLedger,
  type DeferredAuthorization,
  keyId,
  type NewPayment,
  type OpenAmounts,
  type PaymentKey,
  type SettlementRecord,
  type StoredAnswer,
} from "../ledger.ts";
import { batchRows, guard, openAmounts, openRowsOf, openSums, openSumsOf, stillRead, target } from "./rules.ts";
import { batch, byKey, keyColumns, paymentRowOf, type Store, statement } from "./statements.ts";

/** The columns that say whether a claim is deferred, and keep what the worker needs to submit it. */
const deferral = (deferred: DeferredAuthorization | null) =>
  deferred
    ? { deferred: true, signature: deferred.signature, validAfter: deferred.validAfter.toString() }
    : { deferred: false, signature: null, validAfter: null };

/** A claim's row as the batched insert takes it. */
type NewRow = Omit<NewPayment, "amount" | "validBefore" | "paymentId"> & {
  amount: string;
  validBefore: string;
  paymentId: string | null;
} & ReturnType<typeof deferral>;
const newRow = (entry: NewPayment, deferred: DeferredAuthorization | null): NewRow => ({
  ...entry,
  paymentId: entry.paymentId ?? null,
  ...deferral(deferred),
  amount: entry.amount.toString(),
  validBefore: entry.validBefore.toString(),
});

/** The first reads of paid calls (lookup): each key's row, and its payer's open amounts in its token. */
const LOOKUPS = batch(
  keyColumns((key: PaymentKey) => key),
  true,
);
const LOOKUP = statement(sql`
  select v.i as lookup_index, o.unsettled as lookup_unsettled, o.owed as lookup_owed, p.*
  from ${LOOKUPS.from} ${openSumsOf(sql`v`)}
  left join ${payment} as p on p.token = v.token and p.payer = v.payer and p.nonce = v.nonce`);

/** A new claim's columns, named as the table's: the insert names them and reads them from one list. */
const CLAIMS = batch<NewRow>([
  ...keyColumns((row: NewRow) => row),
  { name: "amount", type: "numeric", of: (row) => row.amount },
  { name: "route", type: "text", of: (row) => row.route },
  { name: "subject", type: "text", of: (row) => row.subject },
  { name: "fingerprint", type: "text", of: (row) => row.fingerprint },
  { name: "signature_hash", type: "text", of: (row) => row.signatureHash },
  { name: "encoding", type: "text", of: (row) => row.encoding },
  { name: "payment_id", type: "text", of: (row) => row.paymentId },
  { name: "valid_before", type: "numeric", of: (row) => row.validBefore },
  { name: "deferred", type: "boolean", of: (row) => row.deferred },
  { name: "signature", type: "text", of: (row) => row.signature },
  { name: "valid_after", type: "numeric", of: (row) => row.validAfter },
]);
/** New claims (insertClaim), each with what its payer had open before the statement. */
const INSERT_CLAIMS = statement(sql`
  with ins as (
    insert into ${payment} (${sql.raw(CLAIMS.names)}, status)
    select v.*, ${sql.raw(`'${target("claimed")}'`)} from ${CLAIMS.from}
    on conflict do nothing
    returning token, payer, nonce)
  select ins.token, ins.payer, ins.nonce, o.unsettled, o.owed from ins ${openSumsOf(sql`ins`)}`);

type Settling = { key: PaymentKey; answer: StoredAnswer | null; record: SettlementRecord };
/** A settlement's record and the answer it buys (null: keep the stored one). */
const SETTLINGS = batch<Settling>([
  ...keyColumns((i: Settling) => i.key),
  { name: "transaction", type: "text", of: (i) => i.record.transaction ?? null },
  { name: "settler", type: "text", of: (i) => i.record.settler ?? null },
  { name: "settler_nonce", type: "integer", of: (i) => i.record.settlerNonce ?? null },
  { name: "response_status", type: "integer", of: (i) => i.answer?.status ?? null },
  { name: "response_type", type: "text", of: (i) => i.answer?.type ?? null },
  { name: "response_body", type: "text", of: (i) => i.answer?.body ?? null },
]);
type Signed = Required<SettlementRecord>;
/** The signed transactions of a SETTLING batch, each once (a transaction settles many payments): the four parameters after the batch's. */
const SIGNED = (["text", "text", "integer", "text"] as const).map((type, i) => SETTLINGS.array(i + 1, type));
/**
 * Settlements about to be broadcast (settling): the transaction, and the answer unless it is stored
 * already; a signed transaction is recorded once, with the first of its payments still this request's.
 */
const SETTLING = statement(sql`
  with updated as (
    update ${payment} set status = ${sql.raw(`'${target("settling")}'`)}, transaction = v.transaction, settler = v.settler, settler_nonce = v.settler_nonce,
      response_status = coalesce(v.response_status, ${payment.responseStatus}), response_type = coalesce(v.response_type, ${payment.responseType}), response_body = coalesce(v.response_body, ${payment.responseBody}), updated_at = now()
    from ${SETTLINGS.from}
    where ${batchRows("settling")}
    returning ${payment.token}, ${payment.payer}, ${payment.nonce}, ${payment.transaction}),
  recorded as (
    insert into ${settlementTransaction} (transaction, settler, settler_nonce, raw_transaction)
    select * from unnest(${SIGNED[0]}, ${SIGNED[1]}, ${SIGNED[2]}, ${SIGNED[3]}) as t(transaction, settler, settler_nonce, raw_transaction)
    where t.transaction in (select transaction from updated)
    on conflict do nothing)
  select token, payer, nonce from updated`);

/** Each signed transaction of `items` once, as SIGNED's four arrays. */
function signedOf(items: readonly Settling[]): unknown[][] {
  const signed = new Map<string, Signed>();
  for (const { record } of items)
    if (record.transaction && record.settler && record.settlerNonce !== undefined && record.rawTransaction)
      signed.set(record.transaction, record as Signed);
  const all = [...signed.values()];
  return [
    all.map((s) => s.transaction),
    all.map((s) => s.settler),
    all.map((s) => s.settlerNonce),
    all.map((s) => s.rawTransaction),
  ];
}

type Settled = { key: PaymentKey; transaction: string };
const SETTLEDS = batch<Settled>([
  ...keyColumns((i: Settled) => i.key),
  { name: "transaction", type: "text", of: (i) => i.transaction },
]);
/** Settled payments (settled): their answers were stored when they were queued or settling. */
const SETTLED = statement(sql`
  update ${payment} set status = ${sql.raw(`'${target("settled")}'`)}, transaction = v.transaction, failure = null, signature = null, settled_at = now(), updated_at = now()
  from ${SETTLEDS.from}
  where ${batchRows("settled")}`);

/** The answer columns of a write. */
const answerOf = (answer: StoredAnswer) => ({
  responseStatus: answer.status,
  responseType: answer.type,
  responseBody: answer.body,
});

/**
 * Claims and answers. A payment is claimed by inserting its row: the primary key on
 * (token, payer, nonce) lets exactly one request, on any replica, go on to settle it.
 */
export function sqlClaims(store: Store): ClaimLedger {
  /**
   * New claims made at about the same moment, inserted in one statement: each gets, when its row is
   * new (the first of a batch's copies of one payment; any other finds the row there), what its
   * payer had open before this statement (openFor in its token; the batch's own rows not counted,
   * as concurrent claims never count each other's), else null.
   */
  const insertClaim = coalesced(async (rows: NewRow[]): Promise<(OpenAmounts | null)[]> => {
    const first = new Map<string, number>();
    for (const [i, row] of rows.entries()) if (!first.has(keyId(row))) first.set(keyId(row), i);
    const unique = [...first.values()].map((i) => rows[i]!);
    const inserted = await queryPrepared<PaymentKey & { unsettled: string; owed: string }>(
      await store,
      "ledger_insert_claims",
      INSERT_CLAIMS,
      CLAIMS.values(unique),
    );
    const won = new Map(inserted.map((row) => [keyId(row), openAmounts(row)]));
    return rows.map((row, i) => (first.get(keyId(row)) === i ? (won.get(keyId(row)) ?? null) : null));
  });

  /**
   * The first reads of paid calls made at about the same moment, in one statement: each key's row
   * (if any) and what its payer has open (openFor in the key's token).
   */
  const lookups = coalesced(
    async (keys: PaymentKey[]): Promise<{ row: PaymentRow | undefined; open: OpenAmounts }[]> => {
      const answers: { row: PaymentRow | undefined; open: OpenAmounts }[] = [];
      for (const raw of await queryPrepared<Record<string, unknown>>(
        await store,
        "ledger_lookup",
        LOOKUP,
        LOOKUPS.values(keys),
      )) {
        answers[Number(raw.lookup_index) - 1] = {
          row: raw.token == null ? undefined : paymentRowOf(raw),
          open: openAmounts({ unsettled: raw.lookup_unsettled as string, owed: raw.lookup_owed as string }),
        };
      }
      return answers;
    },
  );

  /** The payments of one transaction are recorded together, in one statement. */
  const settlingRows = coalesced(async (items: Settling[]): Promise<boolean[]> => {
    const written = await queryPrepared<PaymentKey>(await store, "ledger_settling", SETTLING, [
      ...SETTLINGS.values(items),
      ...signedOf(items),
    ]);
    const ids = new Set(written.map(keyId));
    return items.map((i) => ids.has(keyId(i.key)));
  });

  const settledRows = coalesced(async (items: Settled[]): Promise<void[]> => {
    await queryPrepared(await store, "ledger_settled", SETTLED, SETTLEDS.values(items));
    return items.map(() => undefined);
  });

  /** claim and claimDeferred: a new row, or one whose earlier attempt failed or was abandoned, same request and signature. */
  const claimRow = async (entry: NewPayment, deferred: DeferredAuthorization | null): Promise<boolean> => {
    const db = await store;
    if (entry.paymentId) {
      // The identifier passes on from a payment that was never charged (failed, expired) to this one.
      await db
        .update(payment)
        .set({ paymentId: null })
        // Not from the row being claimed again: it keeps its identifier (a retry signed anew must find it).
        .where(
          and(
            eq(payment.payer, entry.payer),
            eq(payment.paymentId, entry.paymentId),
            guard("idReleased"),
            sql`not (${byKey(entry)})`,
          ),
        );
    }
    if (await insertClaim(newRow(entry, deferred))) return true;
    const now = Date.now();
    const reclaimed = await db
      .update(payment)
      .set({ ...deferral(deferred), ...CLEARED_ON_RECLAIM, status: target("reclaimed"), updatedAt: new Date(now) })
      .where(
        and(
          byKey(entry),
          or(guard("reclaimed", now), guard("takenOver", now)),
          eq(payment.fingerprint, entry.fingerprint),
          eq(payment.signatureHash, entry.signatureHash),
        ),
      )
      .returning({ nonce: payment.nonce });
    return reclaimed.length > 0;
  };

  /** An update of `key`'s row guarded by `event`: whether it was written. */
  const write = async (
    key: PaymentKey,
    event: Parameters<typeof guard>[0],
    set: Partial<typeof payment.$inferInsert>,
    also?: SQL,
  ): Promise<boolean> => {
    const now = Date.now();
    const written = await (await store)
      .update(payment)
      .set({ ...set, updatedAt: new Date(now) })
      .where(and(byKey(key), guard(event, now), also))
      .returning({ nonce: payment.nonce });
    return written.length > 0;
  };

  return {
    async find(key) {
      const [row] = await (await store).select().from(payment).where(byKey(key)).limit(1);
      return row;
    },
    async findByPaymentId(payer, paymentId) {
      const [row] = await (await store)
        .select()
        .from(payment)
        .where(and(eq(payment.payer, payer), eq(payment.paymentId, paymentId)))
        .limit(1);
      return row;
    },
    lookup: (key) => lookups(key),
    async openFor(payer, token) {
      const [row] = await (await store).select(openSums(token)).from(payment).where(openRowsOf(payer));
      return openAmounts(row);
    },
    claim: (entry) => claimRow(entry, null),
    claimDeferred: (entry, authorization) => claimRow(entry, authorization),
    /**
     * Deferred mode's first step for a payment never seen: its claim is inserted, and what its payer
     * had open before it comes back with it, in one round trip.
     */
    async claimFirst(entry, authorization) {
      return (await insertClaim(newRow(entry, authorization))) ?? undefined;
    },
    async unclaim(key, signatureHash) {
      await (await store)
        .delete(payment)
        .where(and(byKey(key), guard("unclaimed"), eq(payment.signatureHash, signatureHash)));
    },
    async reference(key, reference) {
      await write(key, "referenced", { reference });
    },
    async waived(key, answer) {
      await write(key, "waived", { status: target("waived"), ...answerOf(answer) });
    },
    async failed(key, failure, transaction, read) {
      await write(
        key,
        "failed",
        { status: target("failed"), failure, transaction: transaction ?? null, signature: null },
        stillRead(read),
      );
    },
    /**
     * Written before the transaction leaves, so a crash or a timeout leaves a row the chain can
     * settle. The payments of one transaction are recorded together, in one statement.
     */
    settling: (key, answer, record = {}) => settlingRows({ key, answer, record }),
    settled: (key, transaction) => settledRows({ key, transaction }),
    async touch(key) {
      await write(key, "touched", {});
    },
    async repay(payer, by, upTo) {
      // Oldest first, each debt whole, while their running total fits in what the payment covers.
      await (await store).execute(sql`
        with debts as (
          select token, payer, nonce,
            sum(${payment.amount}) over (order by ${payment.updatedAt}, ${payment.nonce}) as upto
          from ${payment} where ${payment.payer} = ${payer} and ${guard("repaid")})
        update ${payment} set repaid_by = ${by.nonce}, updated_at = now() from debts
        where ${payment.token} = debts.token and ${payment.payer} = debts.payer and ${payment.nonce} = debts.nonce
          and debts.upto <= ${upTo.toString()}::numeric and ${guard("repaid")}`);
    },
    claimRerun: (key) => write(key, "rerunClaimed", { responseStatus: RERUN_MARK }),
    async releaseRerun(key) {
      await write(key, "rerunReleased", { responseStatus: null });
    },
    async answered(key, answer) {
      await write(key, "answered", answerOf(answer));
    },
    async paidFor(payer: Address, subject: string, routes: string[], since: Date) {
      const [row] = await (await store)
        .select({ nonce: payment.nonce })
        .from(payment)
        .where(
          and(
            eq(payment.payer, payer),
            eq(payment.subject, subject),
            inArray(payment.route, routes),
            // Settled, or answered on deferred credit and still settling (within the caps: the exposure is bounded).
            or(
              and(eq(payment.status, "settled"), gt(payment.settledAt, since)),
              and(
                eq(payment.deferred, true),
                inArray(payment.status, ["queued", "settling"]),
                gt(payment.createdAt, since),
              ),
            ),
          ),
        )
        .limit(1);
      return row !== undefined;
    },
  };
}
