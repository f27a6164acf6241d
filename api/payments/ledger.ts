import { type SQL, and, count, eq, getTableColumns, gt, inArray, isNull, lt, or, sql } from "drizzle-orm";
import type { Address } from "../../config/addresses.ts";
import { OPEN_STATUSES, PAYMENT_STATUSES, payment, type PaymentRow, type PaymentStatus, signInNonce } from "../store/schema.ts";
import { PgDialect } from "drizzle-orm/pg-core";
import { queryPrepared } from "../db.ts";
import { coalesced } from "../store/coalesce.ts";
import type { ServiceDb } from "../store/store.ts";
import {
  ABANDONED_AFTER_MS,
  type DeferredAuthorization,
  type ExposureCaps,
  keyId,
  type Ledger,
  type NewPayment,
  type OpenAmounts,
  type OutcomeCounts,
  type PaymentKey,
  RERUN_LEASE_MS,
  RERUN_MARK,
  type Resolution,
  type ServedTotals,
  type SettlementRecord,
  STALE_PENDING_MS,
  type StoredAnswer,
} from "./ledger/ledger.ts";

export * from "./ledger/ledger.ts";

/** The columns that say whether a claim is deferred, and keep what the worker needs to submit it. */
const deferral = (deferred: DeferredAuthorization | null) =>
  deferred ? { deferred: true, signature: deferred.signature, validAfter: deferred.validAfter.toString() } : { deferred: false, signature: null, validAfter: null };

/** Rows answered before settlement whose money has not arrived yet: the service's exposure. */
const OPEN_DEFERRED = sql`${payment.deferred} and ${payment.repaidBy} is null and ${payment.status} in ('pending', 'queued', 'settling')`;
/**
 * A debt: an answer given before settlement whose settlement failed by the payer's doing (the
 * transfer failed, or the authorization was cancelled), not yet paid again.
 */
const DEBT = sql`${payment.deferred} and ${payment.repaidBy} is null and ${payment.status} in ('failed', 'used_elsewhere') and ${payment.responseBody} is not null`;

/** A payer's open rows (the partial index payment_open_payer: the literal status list, see OPEN_STATUSES). */
const openRowsOf = (payer: Address | SQL) => and(eq(payment.payer, payer), sql.raw(`status in (${OPEN_STATUSES})`));
/** Over a payer's open rows: what is claimed in `token` and not settled, and what it owes. */
const openSums = (token: Address | SQL) => ({
  unsettled: sql<string>`coalesce(sum(${payment.amount}) filter (where ${payment.token} = ${token} and ${payment.status} in ('pending', 'queued', 'settling')), 0)::text`.as("unsettled"),
  owed: sql<string>`coalesce(sum(${payment.amount}) filter (where ${DEBT}), 0)::text`.as("owed"),
});
/** `o.unsettled` and `o.owed` (openSums) for each (token, payer) row of `keys`: a lateral join. */
const openSumsOf = (keys: SQL) => {
  const { unsettled, owed } = openSums(sql`${keys}.token`);
  return sql`cross join lateral (select ${unsettled.getSQL()} as unsettled, ${owed.getSQL()} as owed from ${payment} where ${openRowsOf(sql`${keys}.payer`)}) as o`;
};
const openAmounts = (row: { unsettled: string | null; owed: string | null } | undefined): OpenAmounts => ({ unsettled: BigInt(row?.unsettled ?? "0"), owed: BigInt(row?.owed ?? "0") });

/** The row of each (token, payer, nonce) of a batch `v` (unnestKeys): the statements that write many rows at once. */
const byValues = sql`${payment.token} = v.token and ${payment.payer} = v.payer and ${payment.nonce} = v.nonce`;

const dialect = new PgDialect();
/**
 * The text of a prepared statement (queryPrepared) written with the ledger's rules (DEBT,
 * openSums…) as drizzle SQL: rendered once. Its parameters are written `$n` in the text, so that
 * one text, and one plan, serves any number of rows (arrays, unnest).
 */
const statement = (query: SQL): string => {
  const rendered = dialect.sqlToQuery(query);
  if (rendered.params.length > 0) throw new Error("a prepared ledger statement takes its parameters as $n");
  return rendered.sql;
};
/**
 * `v`: one row per payment of a batch, from the arrays $1 (tokens), $2 (payers), $3 (nonces) and the
 * columns that follow; `ordinal` numbers them (`v.i`, from 1) for a read that answers each in turn.
 */
const unnestKeys = (more = "", types = "", ordinal = false) =>
  sql.raw(`unnest($1::text[], $2::text[], $3::text[]${types})${ordinal ? " with ordinality" : ""} as v(token, payer, nonce${more}${ordinal ? ", i" : ""})`);

/** The first reads of paid calls (lookup): each key's row, and its payer's open amounts in its token. */
const LOOKUP = statement(sql`
  select v.i as lookup_index, o.unsettled as lookup_unsettled, o.owed as lookup_owed, p.*
  from ${unnestKeys("", "", true)} ${openSumsOf(sql`v`)}
  left join ${payment} as p on p.token = v.token and p.payer = v.payer and p.nonce = v.nonce`);

/** New claims (insertClaim), each with what its payer had open before the statement. */
const INSERT_CLAIMS = statement(sql`
  with ins as (
    insert into ${payment} (token, payer, nonce, amount, route, subject, fingerprint, signature_hash, encoding, payment_id, valid_before, deferred, signature, valid_after, status)
    select v.*, 'pending' from ${unnestKeys(
      ", amount, route, subject, fingerprint, signature_hash, encoding, payment_id, valid_before, deferred, signature, valid_after",
      ", $4::numeric[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::numeric[], $12::boolean[], $13::text[], $14::numeric[]",
    )}
    on conflict do nothing
    returning token, payer, nonce)
  select ins.token, ins.payer, ins.nonce, o.unsettled, o.owed from ins ${openSumsOf(sql`ins`)}`);

/** Deferred answers queued (queueAnswers) if the batch as a whole stays within the caps ($7 per payer, $8 in all). */
const OPEN_EXPOSURE = sql`(${OPEN_DEFERRED}) or (${DEBT})`;
const QUEUE_ANSWERS = statement(sql`
  update ${payment} set status = 'queued', response_status = v.rs, response_type = v.rt, response_body = v.rb, updated_at = now()
  from ${unnestKeys(", rs, rt, rb", ", $4::integer[], $5::text[], $6::text[]")}
  where ${byValues} and ${payment.status} = 'pending'
    and (select coalesce(max(s), 0) <= $7::numeric from (
          select sum(${payment.amount}) as s from ${payment} where (${OPEN_EXPOSURE}) and ${payment.payer} = any($2::text[]) group by ${payment.payer}) as per_payer)
    and (select coalesce(sum(${payment.amount}), 0) <= $8::numeric from ${payment} where ${OPEN_EXPOSURE})
  returning ${payment.token}, ${payment.payer}, ${payment.nonce}`);

/** Settlements about to be broadcast (settling): the transaction, and the answer unless it is stored already. */
const SETTLING = statement(sql`
  update ${payment} set status = 'settling', transaction = v.tx, settler = v.settler, settler_nonce = v.sn, raw_transaction = v.raw,
    response_status = coalesce(v.rs, ${payment.responseStatus}), response_type = coalesce(v.rt, ${payment.responseType}), response_body = coalesce(v.rb, ${payment.responseBody}), updated_at = now()
  from ${unnestKeys(", tx, settler, sn, raw, rs, rt, rb", ", $4::text[], $5::text[], $6::integer[], $7::text[], $8::integer[], $9::text[], $10::text[]")}
  where ${byValues} and ${payment.status} in ('pending', 'settling')
  returning ${payment.token}, ${payment.payer}, ${payment.nonce}`);

/** Settled payments (settled): their answers were stored when they were queued or settling. */
const SETTLED = statement(sql`
  update ${payment} set status = 'settled', transaction = v.tx, failure = null, signature = null, settled_at = now(), updated_at = now()
  from ${unnestKeys(", tx", ", $4::text[]")}
  where ${byValues} and ${payment.status} in ('pending', 'settling', 'failed')`);

/** The rows of a raw statement (db.execute): node-postgres wraps them in a result, PGlite's drizzle driver too, others may not. */
const rowsOf = <T>(result: unknown): T[] => (result as { rows?: T[] }).rows ?? (result as T[]);
const COLUMNS = Object.entries(getTableColumns(payment));
/** A payment row as a raw statement returns it (column names, driver values), as drizzle's select would map it. */
const paymentRowOf = (raw: Record<string, unknown>): PaymentRow =>
  Object.fromEntries(COLUMNS.map(([key, column]) => [key, raw[column.name] == null ? null : column.mapFromDriverValue(raw[column.name])])) as PaymentRow;

const byKey = (k: PaymentKey) => and(eq(payment.token, k.token), eq(payment.payer, k.payer), eq(payment.nonce, k.nonce));

/** The key columns of a batch: the arrays $1, $2, $3 of the batched statements. */
const keyColumns = (keys: PaymentKey[]) => [keys.map((k) => k.token), keys.map((k) => k.payer), keys.map((k) => k.nonce)];
/** An answer's columns for a batch (null: keep the stored one). */
const answerColumns = (answers: (StoredAnswer | null)[]) => [answers.map((a) => a?.status ?? null), answers.map((a) => a?.type ?? null), answers.map((a) => a?.body ?? null)];
/** A claim's row as the batched insert takes it. */
type NewRow = Omit<NewPayment, "amount" | "validBefore" | "paymentId"> & { amount: string; validBefore: string; paymentId: string | null } & ReturnType<typeof deferral>;

/**
 * The payment ledger. A payment is claimed by inserting its row: the primary key on
 * (token, payer, nonce) lets exactly one request, on any replica, go on to settle it.
 */
export class PaymentLedger implements Ledger {
  /** Takes the store as a promise: the API module is loaded synchronously, the store opens later. */
  constructor(private readonly store: Promise<ServiceDb> | ServiceDb) {}

  /**
   * New claims made at about the same moment, inserted in one statement: each gets, when its row is
   * new (the first of a batch's copies of one payment; any other finds the row there), what its
   * payer had open before this statement (openFor in its token; the batch's own rows not counted,
   * as concurrent claims never count each other's), else null.
   */
  private readonly insertClaim = coalesced(async (rows: NewRow[]): Promise<(OpenAmounts | null)[]> => {
    const first = new Map<string, number>();
    rows.forEach((row, i) => first.has(keyId(row)) || first.set(keyId(row), i));
    const batch = [...first.values()].map((i) => rows[i]!);
    const column = <K extends keyof NewRow>(name: K) => batch.map((row) => row[name]);
    const inserted = await queryPrepared<PaymentKey & { unsettled: string; owed: string }>(await this.store, "ledger_insert_claims", INSERT_CLAIMS, [
      ...(["token", "payer", "nonce", "amount", "route", "subject", "fingerprint", "signatureHash", "encoding", "paymentId", "validBefore", "deferred", "signature", "validAfter"] as const).map(column),
    ]);
    const won = new Map(inserted.map((row) => [keyId(row), openAmounts(row)]));
    return rows.map((row, i) => (first.get(keyId(row)) === i ? (won.get(keyId(row)) ?? null) : null));
  });

  /**
   * Answers of deferred claims made at about the same moment, queued in one statement if the
   * batch as a whole stays within the caps (every payer of the batch, and the total); otherwise
   * each is judged alone (queuedWithinCaps), so that the caps hold exactly either way.
   */
  private readonly queueAnswers = coalesced(async (items: { key: PaymentKey; answer: StoredAnswer; caps: ExposureCaps }[]): Promise<boolean[]> => {
    const { caps } = items[0]!;
    const rows = await queryPrepared<PaymentKey>(await this.store, "ledger_queue_answers", QUEUE_ANSWERS, [
      ...keyColumns(items.map((i) => i.key)),
      items.map((i) => i.answer.status),
      items.map((i) => i.answer.type),
      items.map((i) => i.answer.body),
      caps.perPayer.toString(),
      caps.total.toString(),
    ]);
    const queued = new Set(rows.map(keyId));
    // One after another: each refused one leaves the open sum at once (it settles first), so the
    // later ones of a burst find the room a concurrent judgement would have denied them all.
    const outcomes: boolean[] = [];
    for (const i of items) outcomes.push(queued.has(keyId(i.key)) || (await this.queuedAlone(i.key, i.answer, i.caps)));
    return outcomes;
  });

  /**
   * The first reads of paid calls made at about the same moment, in one statement: each key's row
   * (if any) and what its payer has open (openFor in the key's token).
   */
  private readonly lookups = coalesced(async (keys: PaymentKey[]): Promise<{ row: PaymentRow | undefined; open: OpenAmounts }[]> => {
    const answers: { row: PaymentRow | undefined; open: OpenAmounts }[] = [];
    for (const raw of await queryPrepared<Record<string, unknown>>(await this.store, "ledger_lookup", LOOKUP, keyColumns(keys))) {
      answers[Number(raw.lookup_index) - 1] = {
        row: raw.token == null ? undefined : paymentRowOf(raw),
        open: openAmounts({ unsettled: raw.lookup_unsettled as string, owed: raw.lookup_owed as string }),
      };
    }
    return answers;
  });

  /** A round trip to the store, for health checks. */
  async ping(): Promise<void> {
    await (await this.store).select({ nonce: payment.nonce }).from(payment).limit(1);
  }

  /** The payment the payer sent under this x402 payment-identifier, if any. */
  async findByPaymentId(payer: Address, paymentId: string): Promise<PaymentRow | undefined> {
    const [row] = await (await this.store).select().from(payment).where(and(eq(payment.payer, payer), eq(payment.paymentId, paymentId))).limit(1);
    return row;
  }

  async find(key: PaymentKey): Promise<PaymentRow | undefined> {
    const [row] = await (await this.store).select().from(payment).where(byKey(key)).limit(1);
    return row;
  }

  /**
   * Claims the payment for this request: true when this request now owns it (a new row, or a row
   * whose earlier attempt failed or was abandoned, for the same request and signature).
   */
  async claim(entry: NewPayment): Promise<boolean> {
    return this.claimRow(await this.store, entry, null);
  }

  /**
   * Claims the payment to be answered before it is settled (deferred): the row keeps the
   * authorization's signature for the worker. Whether it may be answered on credit is decided when
   * its answer is ready (queuedWithinCaps).
   */
  async claimDeferred(entry: NewPayment, authorization: DeferredAuthorization): Promise<boolean> {
    return this.claimRow(await this.store, entry, authorization);
  }

  /**
   * Deferred mode's first step for a payment never seen (no payment-identifier): its deferred claim
   * is inserted, and what its payer had open before it comes back with it, in one round trip; the
   * funds are checked after (unclaim takes the row back if they fall short). Undefined when a row
   * for the payment exists: the caller then goes the full way (lookup, verify, claim).
   */
  async claimFirst(entry: NewPayment, authorization: DeferredAuthorization): Promise<OpenAmounts | undefined> {
    const open = await this.insertClaim(this.newRow(entry, authorization));
    return open ?? undefined;
  }

  /** A claim made by claimFirst whose payment was then refused (funds, nonce): its row goes, as if it had never been claimed. */
  async unclaim(key: PaymentKey, signatureHash: string): Promise<void> {
    await (await this.store).delete(payment).where(and(byKey(key), eq(payment.status, "pending"), eq(payment.signatureHash, signatureHash)));
  }

  private newRow(entry: NewPayment, deferred: DeferredAuthorization | null): NewRow {
    return { ...entry, paymentId: entry.paymentId ?? null, ...deferral(deferred), amount: entry.amount.toString(), validBefore: entry.validBefore.toString() };
  }

  private async claimRow(db: ServiceDb, entry: NewPayment, deferred: DeferredAuthorization | null): Promise<boolean> {
    if (entry.paymentId) {
      // The identifier passes on from a payment that was never charged (failed, expired) to this one.
      await db
        .update(payment)
        .set({ paymentId: null })
        .where(and(eq(payment.payer, entry.payer), eq(payment.paymentId, entry.paymentId), inArray(payment.status, ["failed", "expired", "used_elsewhere"])));
    }
    if (await this.insertClaim(this.newRow(entry, deferred))) return true;
    const reclaimed = await db
      .update(payment)
      .set({ ...deferral(deferred), status: "pending", failure: null, transaction: null, settler: null, settlerNonce: null, rawTransaction: null, updatedAt: new Date() })
      .where(
        and(
          byKey(entry),
          or(eq(payment.status, "failed"), and(eq(payment.status, "pending"), lt(payment.updatedAt, new Date(Date.now() - ABANDONED_AFTER_MS)))),
          eq(payment.fingerprint, entry.fingerprint),
          eq(payment.signatureHash, entry.signatureHash),
        ),
      )
      .returning({ nonce: payment.nonce });
    return reclaimed.length > 0;
  }

  /**
   * The settlement is about to be broadcast: the row becomes `settling` with the answer the payer
   * bought (kept when already stored: `answer` null) and, in self-settlement, the transaction
   * (hash, relayer, nonce, signed bytes). Written before the transaction leaves, so a crash or a
   * timeout leaves a row the chain can settle. The payments of one transaction are recorded
   * together, in one statement. False when the row is no longer this request's.
   */
  settling(key: PaymentKey, answer: StoredAnswer | null, record: SettlementRecord = {}): Promise<boolean> {
    return this.settlingRows({ key, answer, record });
  }

  private readonly settlingRows = coalesced(async (items: { key: PaymentKey; answer: StoredAnswer | null; record: SettlementRecord }[]): Promise<boolean[]> => {
    const records = items.map((i) => i.record);
    const written = await queryPrepared<PaymentKey>(await this.store, "ledger_settling", SETTLING, [
      ...keyColumns(items.map((i) => i.key)),
      records.map((r) => r.transaction ?? null),
      records.map((r) => r.settler ?? null),
      records.map((r) => r.settlerNonce ?? null),
      records.map((r) => r.rawTransaction ?? null),
      ...answerColumns(items.map((i) => i.answer)),
    ]);
    const ids = new Set(written.map(keyId));
    return items.map((i) => ids.has(keyId(i.key)));
  });

  /**
   * The money moved in `transaction` (the answer it bought is stored already). The payments a
   * transaction settled are recorded together, in one statement.
   */
  settled(key: PaymentKey, transaction: string): Promise<void> {
    return this.settledRows({ key, transaction });
  }

  private readonly settledRows = coalesced(async (items: { key: PaymentKey; transaction: string }[]): Promise<void[]> => {
    await queryPrepared(await this.store, "ledger_settled", SETTLED, [...keyColumns(items.map((i) => i.key)), items.map((i) => i.transaction)]);
    return items.map(() => undefined);
  });

  /** Records what the claimed call made that must be undone if its payment fails (the report's id), before making it. */
  async reference(key: PaymentKey, reference: string): Promise<void> {
    await (await this.store).update(payment).set({ reference, updatedAt: new Date() }).where(and(byKey(key), eq(payment.status, "pending")));
  }

  /**
   * A deferred payment answered: its row joins the settlement queue with the answer it bought, if
   * the payer's and the service's unsettled value, this row included, stay within `caps`. False
   * when a cap says this one settles first: the row is then a settle-first claim, still pending.
   *
   * Optimistic, and exact: the row was inserted (committed) when the call was claimed, and the
   * sums run now, before anything is answered. Of two concurrent claims, any replicas, the one
   * whose sums run last sees both rows, so a cap is never passed; at worst both settle first.
   */
  queuedWithinCaps(key: PaymentKey, answer: StoredAnswer, caps: ExposureCaps): Promise<boolean> {
    return this.queueAnswers({ key, answer, caps });
  }

  private async queuedAlone(key: PaymentKey, answer: StoredAnswer, caps: ExposureCaps): Promise<boolean> {
    const db = await this.store;
    const withinCaps = sql`(select coalesce(sum(${payment.amount}) filter (where ${payment.payer} = ${key.payer}), 0) <= ${caps.perPayer.toString()}::numeric
      and coalesce(sum(${payment.amount}), 0) <= ${caps.total.toString()}::numeric from ${payment} where (${OPEN_DEFERRED}) or (${DEBT}))`;
    const queued = await db
      .update(payment)
      .set({ status: "queued", responseStatus: answer.status, responseType: answer.type, responseBody: answer.body, updatedAt: new Date() })
      .where(and(byKey(key), eq(payment.status, "pending"), withinCaps))
      .returning({ nonce: payment.nonce });
    if (queued.length > 0) return true;
    await db.update(payment).set({ deferred: false, signature: null, validAfter: null }).where(and(byKey(key), eq(payment.status, "pending")));
    return false;
  }

  /**
   * The settlement worker's share of the queue: up to `limit` queued rows, soonest validBefore
   * first, now `settling` and its own (FOR UPDATE SKIP LOCKED: two workers never take one row).
   */
  async takeQueued(limit: number): Promise<PaymentRow[]> {
    const db = await this.store;
    const rows = await db.execute(sql`
      update ${payment} set status = 'settling', updated_at = now()
      where (token, payer, nonce) in (
        select token, payer, nonce from ${payment} where status = 'queued'
        order by valid_before limit ${limit} for update skip locked)
      returning token, payer, nonce`);
    const keys = rowsOf<PaymentKey>(rows).map((r) => ({ token: r.token, payer: r.payer, nonce: r.nonce }));
    if (keys.length === 0) return [];
    return db.select().from(payment).where(or(...keys.map(byKey)));
  }

  /** Queued rows whose authorization runs out within `marginSeconds`: they can no longer be settled safely, and are marked expired. */
  async expireQueued(nowSeconds: number, marginSeconds: number): Promise<number> {
    const expired = await (await this.store)
      .update(payment)
      .set({ status: "expired", failure: "deferred settlement not sent before the authorization's validBefore; never charged (the service's loss)", signature: null, updatedAt: new Date() })
      .where(and(eq(payment.status, "queued"), lt(payment.validBefore, String(nowSeconds + marginSeconds))))
      .returning({ nonce: payment.nonce });
    return expired.length;
  }

  /** A deferred row whose settlement did not go through for a reason of ours (RPC down, dropped transaction): back in the queue. */
  async requeue(key: PaymentKey, attempted: boolean): Promise<void> {
    await (await this.store)
      .update(payment)
      .set({ status: "queued", transaction: null, settler: null, settlerNonce: null, rawTransaction: null, ...(attempted ? { attempts: sql`${payment.attempts} + 1` } : {}), updatedAt: new Date() })
      .where(and(byKey(key), eq(payment.deferred, true), inArray(payment.status, ["settling", "failed"])));
  }

  /**
   * Spends a sign-in-with-x nonce for `wallet` until `expiresAt`: true the first time, on any
   * replica; false when it was already used. Expired nonces are pruned on the way.
   */
  async spendSignInNonce(nonce: string, wallet: Address, expiresAt: Date): Promise<boolean> {
    const db = await this.store;
    const inserted = await db.insert(signInNonce).values({ nonce, wallet, expiresAt }).onConflictDoNothing().returning({ nonce: signInNonce.nonce });
    if (inserted.length > 0 && Math.random() < 0.01) await db.delete(signInNonce).where(lt(signInNonce.expiresAt, new Date()));
    return inserted.length > 0;
  }

  /**
   * What is open for `payer`, in one read: `unsettled`, what it has claimed in `token` and not
   * settled yet (spoken for in its balance); `owed`, its debts (deferred answers whose settlement
   * failed by its doing, not paid again), smallest units.
   */
  async openFor(payer: Address, token: Address): Promise<OpenAmounts> {
    const [row] = await (await this.store).select(openSums(token)).from(payment).where(openRowsOf(payer));
    return openAmounts(row);
  }

  /** find(key) and openFor(key.payer, key.token) in one round trip, shared with the calls made meanwhile: the first read of a paid call. */
  lookup(key: PaymentKey): Promise<{ row: PaymentRow | undefined; open: OpenAmounts }> {
    return this.lookups(key);
  }

  /** The payer's debts are paid: the payment `by` (settled, covering them) repaid every one of them. */
  async repay(payer: Address, by: PaymentKey): Promise<void> {
    await (await this.store).update(payment).set({ repaidBy: by.nonce, updatedAt: new Date() }).where(and(eq(payment.payer, payer), DEBT));
  }

  /**
   * A settled payment whose answer was never stored: claims the right to produce it again (one
   * request at a time, on any replica). False if another request holds it.
   */
  async claimRerun(key: PaymentKey): Promise<boolean> {
    const claimed = await (await this.store)
      .update(payment)
      .set({ responseStatus: RERUN_MARK, updatedAt: new Date() })
      .where(
        and(
          byKey(key),
          eq(payment.status, "settled"),
          isNull(payment.responseBody),
          or(isNull(payment.responseStatus), lt(payment.updatedAt, new Date(Date.now() - RERUN_LEASE_MS))),
        ),
      )
      .returning({ nonce: payment.nonce });
    return claimed.length > 0;
  }

  /** The answer could not be produced again (the handler failed): another request may try. */
  async releaseRerun(key: PaymentKey): Promise<void> {
    await (await this.store)
      .update(payment)
      .set({ responseStatus: null, updatedAt: new Date() })
      .where(and(byKey(key), eq(payment.status, "settled"), isNull(payment.responseBody), eq(payment.responseStatus, RERUN_MARK)));
  }

  /** A settled payment whose answer was never stored (crash between settlement and record): keep the answer produced again. */
  async answered(key: PaymentKey, answer: StoredAnswer): Promise<void> {
    await (await this.store)
      .update(payment)
      .set({ responseStatus: answer.status, responseType: answer.type, responseBody: answer.body, updatedAt: new Date() })
      .where(and(byKey(key), eq(payment.status, "settled"), isNull(payment.responseBody)));
  }

  /** Records an answer given without settlement (a free read); the authorization stays unspent on chain. */
  async waived(key: PaymentKey, answer: StoredAnswer): Promise<void> {
    await (await this.store)
      .update(payment)
      .set({ status: "waived", responseStatus: answer.status, responseType: answer.type, responseBody: answer.body, updatedAt: new Date() })
      .where(byKey(key));
  }

  /** Nothing was charged (decided before broadcast, or from a reverted or dropped transaction). */
  async failed(key: PaymentKey, failure: string, transaction?: string): Promise<void> {
    await (await this.store)
      .update(payment)
      .set({ status: "failed", failure, transaction: transaction ?? null, signature: null, updatedAt: new Date() })
      .where(and(byKey(key), inArray(payment.status, ["pending", "settling"])));
  }

  /** Keeps a row `settling` but marks it as looked at (so stale reports and polling see progress). */
  async touch(key: PaymentKey): Promise<void> {
    await (await this.store).update(payment).set({ updatedAt: new Date() }).where(and(byKey(key), eq(payment.status, "settling")));
  }

  /** An outcome read from the chain for a row whose outcome was unknown. Returns false if the row moved on meanwhile. */
  async resolve(key: PaymentKey, resolution: Resolution): Promise<boolean> {
    const now = new Date();
    const set =
      resolution.status === "settled"
        ? { status: "settled" as const, transaction: resolution.transaction, failure: resolution.note ?? null, settledAt: now }
        : { status: resolution.status, failure: resolution.failure, ...(resolution.transaction ? { transaction: resolution.transaction } : {}) };
    const updated = await (await this.store)
      .update(payment)
      .set({ ...set, reconciledAt: now, updatedAt: now })
      .where(and(byKey(key), inArray(payment.status, ["pending", "settling", "failed"])))
      .returning({ nonce: payment.nonce });
    return updated.length > 0;
  }

  /**
   * Rows whose outcome is not known: every `settling` row not touched for `settlingIdleMs`, and
   * `pending` rows abandoned by their request (claimed, never concluded).
   */
  async unresolved(settlingIdleMs: number, limit = 200): Promise<PaymentRow[]> {
    const now = Date.now();
    return (await this.store)
      .select()
      .from(payment)
      .where(
        or(
          and(eq(payment.status, "settling"), lt(payment.updatedAt, new Date(now - settlingIdleMs))),
          and(eq(payment.status, "pending"), lt(payment.updatedAt, new Date(now - ABANDONED_AFTER_MS))),
        ),
      )
      .orderBy(payment.updatedAt)
      .limit(limit);
  }

  /** Payments by outcome, for stats and health. `pending` includes nothing of `settling`: add them for "outcome unknown". */
  async outcomeCounts(): Promise<OutcomeCounts> {
    const db = await this.store;
    const rows = await db.select({ status: payment.status, n: count() }).from(payment).groupBy(payment.status);
    const [extra] = await db
      .select({
        reconciled: sql<string>`count(*) filter (where ${payment.reconciledAt} is not null)`,
        deferredExpired: sql<string>`count(*) filter (where ${payment.deferred} and ${payment.status} = 'expired')`,
        owedUnits: sql<string>`coalesce(sum(${payment.amount}) filter (where ${DEBT}), 0)::text`,
      })
      .from(payment);
    const counts = Object.fromEntries(PAYMENT_STATUSES.map((s) => [s, 0])) as unknown as OutcomeCounts;
    for (const row of rows) counts[row.status] = Number(row.n);
    counts.reconciled = Number(extra?.reconciled ?? 0);
    counts.deferredExpired = Number(extra?.deferredExpired ?? 0);
    counts.owedUnits = extra?.owedUnits ?? "0";
    return counts;
  }

  /** What GET /api/stats reports as served: settled and waived rows by route and token, and the distinct payers of settled ones. */
  async servedTotals(): Promise<ServedTotals> {
    const db = await this.store;
    const rows = await db
      .select({ route: payment.route, token: payment.token, status: payment.status, n: count(), amount: sql<string>`coalesce(sum(${payment.amount}), 0)::text` })
      .from(payment)
      .where(inArray(payment.status, ["settled", "waived"]))
      .groupBy(payment.route, payment.token, payment.status);
    const [payers] = await db.select({ n: sql<string>`count(distinct ${payment.payer})` }).from(payment).where(eq(payment.status, "settled"));
    return {
      rows: rows.map((r) => ({ route: r.route, token: r.token.toLowerCase(), status: r.status as "settled" | "waived", calls: Number(r.n), amount: BigInt(r.amount) })),
      payers: Number(payers?.n ?? 0),
    };
  }

  /** Rows whose outcome has been unknown (pending or settling) for longer than `olderThanMs` (health: STALE_PENDING_MS). */
  async stalePending(olderThanMs = STALE_PENDING_MS): Promise<{ count: number; oldest: Date | null }> {
    const [row] = await (await this.store)
      .select({ n: count(), oldest: sql<string | null>`min(${payment.createdAt})` })
      .from(payment)
      .where(and(inArray(payment.status, ["pending", "settling"]), lt(payment.createdAt, new Date(Date.now() - olderThanMs))));
    return { count: Number(row?.n ?? 0), oldest: row?.oldest ? new Date(row.oldest) : null };
  }

  /** Whether `payer` paid for any of `routes` about `subject` since `since` (settled, or a deferred answer on its way to settlement). */
  async paidFor(payer: Address, subject: string, routes: string[], since: Date): Promise<boolean> {
    const [row] = await (await this.store)
      .select({ nonce: payment.nonce })
      .from(payment)
      .where(
        and(
          eq(payment.payer, payer),
          eq(payment.subject, subject),
          inArray(payment.route, routes),
          // Settled, or answered on deferred credit and still settling (within the caps: the exposure is bounded).
          or(and(eq(payment.status, "settled"), gt(payment.settledAt, since)), and(eq(payment.deferred, true), inArray(payment.status, ["queued", "settling"]), gt(payment.createdAt, since))),
        ),
      )
      .limit(1);
    return row !== undefined;
  }
}
