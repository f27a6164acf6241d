import { and, inArray, lt, sql } from "drizzle-orm";
import { arrayParam, queryPrepared } from "../../../db.ts";
import { coalesced } from "../../../store/coalesce.ts";
import { payment } from "../../../store/schema.ts";
import { fromStatuses } from "../../lifecycle.ts";
import { type ExposureCaps, keyId, type PaymentKey, type SettlementQueue, type StoredAnswer } from "../ledger.ts";
import { batchRows, EXPOSURE_TOTAL, guard, OPEN_EXPOSURE, statusIn, stillRead, target } from "./rules.ts";
import { batch, byKey, filterOnly, keyColumns, paymentRowOf, rowsOf, type Store, statement } from "./statements.ts";

type Queued = { key: PaymentKey; answer: StoredAnswer; caps: ExposureCaps };
const QUEUED = batch<Queued>([
  ...keyColumns((i: Queued) => i.key),
  { name: "response_status", type: "integer", of: (i) => i.answer.status },
  { name: "response_type", type: "text", of: (i) => i.answer.type },
  { name: "response_body", type: "text", of: (i) => i.answer.body },
]);
/** Deferred answers queued (queueAnswers) if the batch as a whole stays within the caps (per payer, then in all: the two parameters after the columns; the total is kept in payment_exposure's few rows, not summed over the payments). */
const QUEUE_ANSWERS = statement(sql`
  update ${payment} set status = ${sql.raw(`'${target("queued")}'`)}, response_status = v.response_status, response_type = v.response_type, response_body = v.response_body, updated_at = now()
  from ${QUEUED.from}
  where ${batchRows("queued")}
    and (select coalesce(max(s), 0) <= ${QUEUED.param(1)}::numeric from (
          select sum(${payment.amount}) as s from ${payment} where (${OPEN_EXPOSURE}) and ${payment.payer} = any(${sql.raw(arrayParam(2, "text"))}) group by ${payment.payer}) as per_payer)
    and ${EXPOSURE_TOTAL} <= ${QUEUED.param(2)}::numeric
  returning ${payment.token}, ${payment.payer}, ${payment.nonce}`);

/** The settlement queue (deferred settlement): answers queued within the caps, taken by the worker. */
export function sqlSettlementQueue(store: Store): SettlementQueue {
  /**
   * Answers of deferred claims made at about the same moment, queued in one statement if the
   * batch as a whole stays within the caps (every payer of the batch, and the total); otherwise
   * each is judged alone (queuedAlone), so that the caps hold exactly either way.
   */
  const queueAnswers = coalesced(async (items: Queued[]): Promise<boolean[]> => {
    const { caps } = items[0]!;
    const rows = await queryPrepared<PaymentKey>(await store, "ledger_queue_answers", QUEUE_ANSWERS, [
      ...QUEUED.values(items),
      caps.perPayer.toString(),
      caps.total.toString(),
    ]);
    const queued = new Set(rows.map(keyId));
    // One after another: each refused one leaves the open sum at once (it settles first), so the
    // later ones of a burst find the room a concurrent judgement would have denied them all.
    const outcomes: boolean[] = [];
    for (const i of items) outcomes.push(queued.has(keyId(i.key)) || (await queuedAlone(i)));
    return outcomes;
  });

  const queuedAlone = async ({ key, answer, caps }: Queued): Promise<boolean> => {
    const db = await store;
    const withinCaps = sql`(select coalesce(sum(${payment.amount}), 0) <= ${caps.perPayer.toString()}::numeric from ${payment} where ${OPEN_EXPOSURE} and ${payment.payer} = ${key.payer})
      and ${EXPOSURE_TOTAL} <= ${caps.total.toString()}::numeric`;
    const queued = await db
      .update(payment)
      .set({
        status: target("queued"),
        responseStatus: answer.status,
        responseType: answer.type,
        responseBody: answer.body,
        updatedAt: new Date(),
      })
      .where(and(byKey(key), guard("queued"), withinCaps))
      .returning({ nonce: payment.nonce });
    if (queued.length > 0) return true;
    await db
      .update(payment)
      .set({ deferred: false, signature: null, validAfter: null })
      .where(and(byKey(key), guard("creditRefused")));
    return false;
  };

  return {
    /**
     * Optimistic, and exact: the row was inserted (committed) when the call was claimed, and the
     * sums run now, before anything is answered. Of two concurrent claims, any replicas, the one
     * whose sums run last sees both rows, so a cap is never passed; at worst both settle first.
     */
    queuedWithinCaps: (key, answer, caps) => queueAnswers({ key, answer, caps }),
    /**
     * FOR UPDATE SKIP LOCKED: two workers never take one row. The rows as taken, in the same
     * statement. The tokens are a filter only: every row has one of them, and a scan of the
     * primary key by token (ANDed with the queue's index) read the whole ledger.
     */
    async takeQueued(limit, tokens) {
      const rows = await (await store).execute(sql`
        update ${payment} set status = ${sql.raw(`'${target("taken")}'`)}, updated_at = now()
        where (token, payer, nonce) in (
          select token, payer, nonce from ${payment}
          where ${statusIn(fromStatuses("taken"))} and ${filterOnly(inArray(payment.token, [...tokens]))}
          order by valid_before limit ${limit} for update skip locked)
        returning *`);
      return rowsOf<Record<string, unknown>>(rows).map(paymentRowOf);
    },
    async expireQueued(nowSeconds, marginSeconds) {
      const expired = await (await store)
        .update(payment)
        .set({
          status: target("expired"),
          failure:
            "deferred settlement not sent before the authorization's validBefore; never charged (the service's loss)",
          signature: null,
          updatedAt: new Date(),
        })
        .where(and(guard("expired"), lt(payment.validBefore, String(nowSeconds + marginSeconds))))
        .returning({ nonce: payment.nonce });
      return expired.length;
    },
    async requeue(key, attempted, read) {
      await (await store)
        .update(payment)
        .set({
          status: target("requeued"),
          transaction: null,
          settler: null,
          settlerNonce: null,
          ...(attempted ? { attempts: sql`${payment.attempts} + 1` } : {}),
          updatedAt: new Date(),
        })
        .where(and(byKey(key), guard("requeued"), stillRead(read)));
    },
  };
}
