import { and, desc, eq, getTableName, gt, inArray, isNull, lt, type SQL, sql } from "drizzle-orm";
import type { Address } from "../../../../config/addresses.ts";
import { queryPrepared } from "../../../db.ts";
import { coalesced } from "../../../store/coalesce.ts";
import { creditLease, creditLot, creditSpend, creditToken, payment } from "../../../store/schema.ts";
import { type SpendEvent, spendAge, spendFrom, spendTarget } from "../../credit-lifecycle.ts";
import { ABANDONED_AFTER_MS } from "../../lifecycle.ts";
import type {
  AbandonedSpend,
  CreditLedger,
  HeldSpendOutcome,
  LeaseSpend,
  LeaseSpendOutcome,
  StoredAnswer,
} from "../ledger.ts";
import { batch, filterOnly, rowMapper, rowsOf, type Store, statement } from "./statements.ts";

const spendRowOf = rowMapper(creditSpend);

/**
 * The WHERE guard of a spend's write, generated from SPEND_TRANSITIONS: its statuses, and its age
 * against ABANDONED_AFTER_MS on the database's clock (the one every replica shares).
 */
const spendGuard = (event: SpendEvent) => {
  const statuses = sql`${creditSpend.status} in (${sql.raw(
    spendFrom(event)
      .map((s) => `'${s}'`)
      .join(", "),
  )})`;
  const age = spendAge(event);
  if (!age) return statuses;
  const cutoff = sql.raw(`now() - interval '${ABANDONED_AFTER_MS} milliseconds'`);
  return age === "abandoned"
    ? sql`${statuses} and ${creditSpend.updatedAt} < ${cutoff}`
    : sql`${statuses} and ${creditSpend.updatedAt} >= ${cutoff}`;
};

/** The owner's lots that can be spent now: unexpired, and bought by a payment that settled (balance and HOLD). */
const spendable = (owner: Address | SQL) => sql`
  ${creditLot.payer} = ${owner} and ${creditLot.expiresAt} > now() and exists (
    select 1 from ${payment} p where p.token = ${creditLot.token} and p.payer = ${creditLot.payer}
      and p.nonce = ${creditLot.nonce} and p.status = 'settled')`;

/**
 * Deletes the spends `where` selects (a guard of `released` or `abandoned`) and gives their draws
 * back to their lots, in one statement: a release cannot be half done, nor done twice. The lots are
 * locked soonest to expire first before any is written (`locked`, which the update reads): the
 * order holds, openings and closes take them in. Written in whatever order the join gave, a release
 * could hold a later lot while waiting for an earlier one that a hold had locked, waiting in turn
 * for the later one: a deadlock, one of them failed after a second.
 */
const releasing = (where: SQL) => sql`
  with gone as (delete from ${creditSpend} where ${where} returning draws),
  back as (
    select split_part(d.key, ':', 1) as token, split_part(d.key, ':', 2) as payer, split_part(d.key, ':', 3) as nonce,
      sum(d.value::numeric) as amount
    from gone, jsonb_each_text(gone.draws) as d group by 1, 2, 3),
  locked as (
    select l.token, l.payer, l.nonce, back.amount from ${creditLot} l
    join back on l.token = back.token and l.payer = back.payer and l.nonce = back.nonce
    order by l.expires_at, l.nonce for update of l),
  restored as (
    update ${creditLot} l set remaining = l.remaining + locked.amount from locked
    where l.token = locked.token and l.payer = locked.payer and l.nonce = locked.nonce returning 1)
  select (select count(*) from gone)::int as released`;

/**
 * The CTEs `locked` (the owner's spendable lots, locked soonest to expire first: the order every
 * hold, opening and close takes them in, so that none deadlocks with another), `ranked` and
 * `total` (their balance). `from` adds what `owner` is read from.
 */
const lockedLots = (owner: SQL, from: SQL = sql``) => sql`
  locked as (
    select ${creditLot.token}, ${creditLot.payer}, ${creditLot.nonce}, ${creditLot.remaining}, ${creditLot.expiresAt}
    from ${creditLot}${from} where ${spendable(owner)} and ${creditLot.remaining} > 0
    order by ${creditLot.expiresAt}, ${creditLot.nonce} for update of ${sql.identifier(getTableName(creditLot))}),
  ranked as (select *, sum(remaining) over (order by expires_at, nonce) as upto from locked),
  total as (select coalesce(sum(remaining), 0) as balance from locked)`;

/** The CTE `draw`: what each locked lot gives of `amount`, soonest to expire first (none when `amount` is null), and what the lot held when locked. */
const drawn = (amount: SQL) => sql`
  draw as (
    select token, payer, nonce, remaining as held, least(remaining, ${amount} - (upto - remaining)) as amount
    from ranked where upto - remaining < ${amount})`;

/**
 * The CTE `debit`: the lots give what `draw` says, only if the statement's insert (`ins`) made its
 * row. The new remainder is what the lot held when `locked` took it (the latest version, locked
 * until commit), not `l.remaining`: Postgres checks the row's constraint (remaining >= 0) on the
 * version this statement's snapshot saw before it finds the newer one, so a close that gave units
 * back while the lot was being locked made an opening that drew them fail (a 503 for a paid call).
 */
const DEBIT = sql`
  debit as (
    update ${creditLot} l set remaining = draw.held - draw.amount from draw
    where l.token = draw.token and l.payer = draw.payer and l.nonce = draw.nonce and exists (select 1 from ins))`;

/** What the owner's open leases have not spent (counted in its balance). */
const leasedOpen = (owner: Address | SQL) => sql`
  (select coalesce(sum(${creditLease.amount} - ${creditLease.spent}), 0) from ${creditLease}
    where ${creditLease.owner} = ${owner} and ${creditLease.closedAt} is null)`;

/** The CTE `asked`: when the lots are `short`, the owner's open leases are asked back (they close at their next recording). */
const askedBack = (owner: SQL, short: SQL) => sql`
  asked as (
    update ${creditLease} l set wanted = true
    where l.owner = ${owner} and l.closed_at is null and ${short})`;

/**
 * A hold's parameters, $1..$8: amount, owner or token hash, then the spend's columns.
 * Its commit does not wait for the disk (synchronous_commit off, for this transaction only): a
 * hold matters only once its answer leaves, and the spent write before that is a durable commit,
 * which makes every earlier commit durable too (the log is flushed in order). A database crash
 * can lose only holds whose answers never left, and no later write without them: their price
 * comes back whole, with nothing charged.
 */
const HOLD = statement(sql`
  with unsynced as (select set_config('synchronous_commit', 'off', true)),
  who as (
    select coalesce($2::text, (select owner from ${creditToken} where hash = $3::text and revoked_at is null)) as owner),
  ${lockedLots(sql`who.owner`, sql`, who`)},
  ${drawn(sql`$1::numeric`)},
  ins as (
    insert into ${creditSpend} (id, owner, route, subject, fingerprint, payment_id, amount, draws, status)
    select $4::text, who.owner, $5::text, $6::text, $7::text, $8::text, $1::numeric,
      (select jsonb_object_agg(token || ':' || payer || ':' || nonce, amount::text) from draw), ${sql.raw(`'${spendTarget("held")}'`)}
    from total, who where who.owner is not null and total.balance >= $1::numeric
    on conflict do nothing
    returning *),
  ${DEBIT},
  ${askedBack(sql`(select owner from who)`, sql`(select balance from total) < $1::numeric`)}
  select who.owner as who, total.balance::text as balance_before, ${leasedOpen(sql`who.owner`)}::text as leased,
    (select token from draw order by amount desc limit 1) as first_token, ins.*
  from unsynced, who, total left join ins on true`);

type Spent = { id: string; answer: StoredAnswer; tokenHash: string | null };
const SPENTS = batch<Spent>([
  { name: "id", type: "text", of: (i) => i.id },
  { name: "token_hash", type: "text", of: (i) => i.tokenHash },
  { name: "response_status", type: "integer", of: (i) => i.answer.status },
  { name: "response_type", type: "text", of: (i) => i.answer.type },
  { name: "response_body", type: "text", of: (i) => i.answer.body },
]);
/**
 * Held spends answered (spent): the calls of a moment in one statement. One paid by a token revoked
 * since is not written (revoked), nor one whose hold is gone (released). The answer's body is kept
 * only for a spend with a Payment-Identifier, the only one a retry can ask for again.
 */
const SPENT = statement(sql`
  with v as (select * from ${SPENTS.from}),
  live as (
    select v.* from v where v.token_hash is null
      or exists (select 1 from ${creditToken} t where t.hash = v.token_hash and t.revoked_at is null)),
  done as (
    update ${creditSpend} set status = ${sql.raw(`'${spendTarget("spent")}'`)}, response_status = live.response_status,
      response_type = live.response_type,
      response_body = case when ${creditSpend.paymentId} is null then null else live.response_body end, updated_at = now()
    from live where ${creditSpend.id} = live.id and ${filterOnly(spendGuard("spent"))}
    returning ${creditSpend.id})
  select v.id, case when v.id in (select id from done) then 'spent'
      when v.id in (select id from live) then 'released' else 'revoked' end as outcome
  from v`);

/**
 * A lease's opening, $1..$4: want, least, owner, id. The owner's spendable lots are locked in the
 * order every hold takes them, up to `want` is drawn (soonest to expire first) if they hold at
 * least `least`, and the lease is inserted; else the owner's other open leases are asked back.
 */
const LEASE = statement(sql`
  with ${lockedLots(sql.raw("$3::text"))},
  take as (select least(balance, $1::numeric) as amount from total where balance >= $2::numeric),
  ${drawn(sql`(select amount from take)`)},
  ins as (
    insert into ${creditLease} (id, owner, amount, draws)
    select $4::text, $3::text, take.amount,
      (select jsonb_object_agg(token || ':' || payer || ':' || nonce, amount::text) from draw)
    from take returning id),
  ${DEBIT},
  ${askedBack(sql.raw("$3::text"), sql`not exists (select 1 from take)`)}
  select total.balance::text as balance, (select amount from take)::text as leased,
    (select token from draw order by amount desc limit 1) as first_token,
    ${leasedOpen(sql.raw("$3::text"))}::text as others
  from total`);

const RECORDS = batch<LeaseSpend>(
  [
    { name: "id", type: "text", of: (s) => s.id },
    { name: "lease", type: "text", of: (s) => s.lease },
    { name: "owner", type: "text", of: (s) => s.owner },
    { name: "token_hash", type: "text", of: (s) => s.tokenHash },
    { name: "route", type: "text", of: (s) => s.route },
    { name: "subject", type: "text", of: (s) => s.subject },
    { name: "fingerprint", type: "text", of: (s) => s.fingerprint },
    { name: "amount", type: "numeric", of: (s) => s.amount.toString() },
    { name: "response_status", type: "integer", of: (s) => s.answer.status },
    { name: "response_type", type: "text", of: (s) => s.answer.type },
  ],
  true,
);
/** Whether a call may be recorded for `owner`: paid by a signed-in wallet (no token hash), or by a token of its still live. */
const tokenLive = (hash: SQL, owner: SQL) =>
  sql`(${hash} is null or exists (select 1 from ${creditToken} t where t.hash = ${hash} and t.owner = ${owner} and t.revoked_at is null))`;
/** Whether the lease row `l` takes calls up to `upto` (their prices, its own spent added): open, and they fit in it. */
const leaseTakes = (l: SQL, upto: SQL) => sql`${l}.closed_at is null and ${l}.spent + ${upto} <= ${l}.amount`;
/** The columns a recording writes (its status besides), in RECORD and RECORD_ONE alike: all of the batch's but the token's hash, which only guards it. */
const SPEND_COLUMNS = RECORDS.columnNames.filter((name) => name !== "token_hash");
/** The recorded spends' insert: each column's value from `value` (a batch's column, or a lone call's parameter), over `from`. */
const insertSpends = (value: (column: string) => SQL, from: SQL) => sql`
  insert into ${creditSpend} (${sql.raw(SPEND_COLUMNS.join(", "))}, status)
  select ${sql.join(SPEND_COLUMNS.map(value), sql`, `)}, ${sql.raw(`'${spendTarget("recorded")}'`)} from ${from}
  returning id`;

/**
 * Answered calls paid from leases, in one statement: a call whose token was revoked is not
 * recorded; the others are, in order, while their lease is open and they fit in it (as the memory
 * ledger records them one by one), and their leases are bumped (renewed). The leases are locked
 * first (in id order): a close waits for that lock, then gives back what the lease did not spend,
 * these calls counted. A lease's spent is bumped from what the lock read, as DEBIT writes a lot: an
 * undo (voidSpend) committed meanwhile lowered it, and `l.spent` would fail the lease's check.
 */
const RECORD = statement(sql`
  with v as (select * from ${RECORDS.from}),
  live as (select v.* from v where ${tokenLive(sql`v.token_hash`, sql`v.owner`)}),
  leases as (
    select id, spent, amount, closed_at from ${creditLease}
    where id in (select lease from live) order by id for update),
  fit as (
    select live.* from (select *, sum(amount) over (partition by lease order by i) as upto from live) live
    join leases on leases.id = live.lease
    where ${leaseTakes(sql`leases`, sql`live.upto`)}),
  per as (select lease, sum(amount) as amount from fit group by lease),
  bumped as (
    update ${creditLease} l set spent = leases.spent + per.amount, renewed_at = now()
    from per join leases on leases.id = per.lease
    where l.id = per.lease returning l.id, l.wanted),
  ins as (${insertSpends((column) => sql.raw(column), sql`fit`)})
  select case when v.id in (select id from ins) then 'recorded'
      when v.id in (select id from live) then 'closed' else 'revoked' end as outcome,
    coalesce((select wanted from bumped where bumped.id = v.lease), false) as wanted
  from v order by v.i`);

/**
 * RECORD for a call recorded alone (a client calling one at a time, an agent in a loop): the same
 * rules, on scalar parameters, its lease bumped by the update whose guard is the rule (no lock
 * before it: the update waits for a close, then reads the lease again). For one row it takes about
 * 0.6 ms against the batch statement's 0.8 ms (its arrays, window and lock), commit included.
 */
const RECORD_ONE = statement(sql`
  with live as (select where ${tokenLive(RECORDS.one("token_hash"), RECORDS.one("owner"))}),
  bumped as (
    update ${creditLease} l set spent = l.spent + ${RECORDS.one("amount")}, renewed_at = now()
    where l.id = ${RECORDS.one("lease")} and ${leaseTakes(sql`l`, RECORDS.one("amount"))} and exists (select from live)
    returning l.wanted),
  ins as (${insertSpends(RECORDS.one, sql`bumped`)})
  select case when exists (select from ins) then 'recorded' when exists (select from live) then 'closed' else 'revoked' end as outcome,
    coalesce((select wanted from bumped), false) as wanted`);

type Recorded = { outcome: LeaseSpendOutcome; wanted: boolean };

/** Prepaid credit in the service store (api/payments/credit-lifecycle.ts). */
export function sqlCredit(store: Store): CreditLedger {
  const spentRows = coalesced(async (items: Spent[]): Promise<HeldSpendOutcome[]> => {
    const outcomes = new Map(
      (
        await queryPrepared<{ id: string; outcome: HeldSpendOutcome }>(
          await store,
          "credit_spent",
          SPENT,
          SPENTS.values(items),
        )
      ).map((r) => [r.id, r.outcome]),
    );
    return items.map((item) => outcomes.get(item.id)!);
  });
  const recordRows = coalesced(async (items: LeaseSpend[]) =>
    (items.length === 1
      ? await queryPrepared<Recorded>(await store, "credit_record_one", RECORD_ONE, RECORDS.row(items[0]!))
      : await queryPrepared<Recorded>(await store, "credit_record", RECORD, RECORDS.values(items))
    ).map(({ outcome, wanted }) => ({ outcome, wanted })),
  );

  /**
   * Closes one open lease (`guard` holding) in one statement: the owner's lots are locked first, in
   * the order holds and openings take them (no deadlock: the lease's update reads `locked`, so it
   * waits for them), then the lease (after any recording holding it, whose calls it then counts),
   * and what it did not spend goes back to the lots it drew from, latest to expire first.
   */
  const close = async (id: string, guard: SQL): Promise<bigint | null> => {
    const [closed] = rowsOf<{ back: string | null }>(
      await (await store).execute(sql`
        with locked as materialized (
          select l.token, l.payer, l.nonce, l.expires_at from ${creditLot} l
          where l.payer = (select owner from ${creditLease} where id = ${id} and closed_at is null)
          order by l.expires_at, l.nonce for update of l),
        closed as (
          update ${creditLease} set closed_at = now()
          where ${creditLease.id} = ${id} and ${creditLease.closedAt} is null and ${guard}
            and (select count(*) from locked) >= 0
          returning (amount - spent) as back, draws),
        drawn as (
          select locked.token, locked.payer, locked.nonce, d.value::numeric as amount,
            sum(d.value::numeric) over (order by locked.expires_at desc, locked.nonce desc) as upto
          from closed cross join lateral jsonb_each_text(closed.draws) as d
          join locked on d.key = locked.token || ':' || locked.payer || ':' || locked.nonce),
        restored as (
          update ${creditLot} l set remaining = l.remaining + least(drawn.amount, closed.back - (drawn.upto - drawn.amount))
          from drawn, closed
          where l.token = drawn.token and l.payer = drawn.payer and l.nonce = drawn.nonce
            and drawn.upto - drawn.amount < closed.back)
        select (select back from closed)::text as back`),
    );
    return closed?.back == null ? null : BigInt(closed.back);
  };

  return {
    async addLot(purchase, amount, expiresAt) {
      await (await store)
        .insert(creditLot)
        .values({ ...purchase, amount: amount.toString(), remaining: amount.toString(), expiresAt })
        .onConflictDoNothing();
    },

    async balance(owner) {
      const [row] = await (await store)
        .select({ balance: sql<string>`coalesce(sum(${creditLot.remaining}), 0) + ${leasedOpen(owner)}` })
        .from(creditLot)
        .where(spendable(owner));
      return BigInt(row?.balance ?? 0);
    },

    /**
     * One statement (HOLD): the owner (or the token's), its spendable lots locked soonest to expire
     * first (the order every hold takes them in, so two holds never deadlock), the price drawn from
     * them in that order, and the spend inserted; the lots are debited only if the insert happened
     * (no other spend has its Payment-Identifier). A concurrent hold waits for the lock and sees
     * what this one left: no unit is spent twice, on any replica.
     */
    async hold(spend) {
      const owner = "owner" in spend.payer ? spend.payer.owner : null;
      const tokenHash = "tokenHash" in spend.payer ? spend.payer.tokenHash : null;
      const [row] = await queryPrepared<Record<string, unknown>>(await store, "credit_hold", HOLD, [
        spend.amount.toString(),
        owner,
        tokenHash,
        spend.id,
        spend.route,
        spend.subject,
        spend.fingerprint,
        spend.paymentId,
      ]);
      if (!row?.who) return { unknownToken: true };
      const before = BigInt(String(row.balance_before ?? 0));
      const leased = BigInt(String(row.leased ?? 0));
      if (row.id)
        return { held: spendRowOf(row), balance: before - spend.amount + leased, token: row.first_token as Address };
      // Not inserted: short, or another spend holds this Payment-Identifier (a copy of this request).
      if (spend.paymentId) {
        const existing = await this.find(row.who as Address, spend.paymentId);
        if (existing) return { existing };
      }
      return { short: { balance: before, leased } };
    },

    async find(owner, paymentId) {
      const [row] = await (await store)
        .select()
        .from(creditSpend)
        .where(and(eq(creditSpend.owner, owner), eq(creditSpend.paymentId, paymentId)));
      return row;
    },

    spent: (id, answer, tokenHash = null) => spentRows({ id, answer, tokenHash }),

    async release(id) {
      await (await store).execute(releasing(sql`${creditSpend.id} = ${id} and ${spendGuard("released")}`));
    },

    async reference(id, reference) {
      await (await store)
        .update(creditSpend)
        .set({ reference, updatedAt: sql`now()` })
        .where(and(eq(creditSpend.id, id), spendGuard("referenced")));
    },

    async releaseAbandoned() {
      const result = await (await store).execute(
        releasing(sql`${spendGuard("abandoned")} and ${creditSpend.reference} is null`),
      );
      return Number(rowsOf<{ released: number }>(result)[0]?.released ?? 0);
    },

    async abandonedReferenced() {
      return (await store)
        .select({ id: creditSpend.id, route: creditSpend.route, reference: creditSpend.reference })
        .from(creditSpend)
        .where(and(spendGuard("abandoned"), sql`${creditSpend.reference} is not null`))
        .orderBy(creditSpend.updatedAt) as Promise<AbandonedSpend[]>;
    },

    async openLease(lease) {
      const [row] = await queryPrepared<{
        balance: string;
        leased: string | null;
        first_token: Address | null;
        others: string;
      }>(await store, "credit_lease", LEASE, [lease.want.toString(), lease.least.toString(), lease.owner, lease.id]);
      const balance = BigInt(row!.balance);
      const others = BigInt(row!.others);
      if (row!.leased === null) return { short: { balance, leased: others } };
      return {
        leased: { id: lease.id, amount: BigInt(row!.leased), balance: balance + others, token: row!.first_token! },
      };
    },

    recordSpend: (spend) => recordRows(spend),

    async spendRecorded(id) {
      const [row] = await (await store)
        .select({ id: creditSpend.id })
        .from(creditSpend)
        .where(and(eq(creditSpend.id, id), eq(creditSpend.status, "spent")));
      return row !== undefined;
    },

    /**
     * The lease is locked first: a recording of it under way (RECORD locks its leases) ends before
     * the spend is looked for, in a later statement that sees what it wrote.
     */
    voidSpend: async (id, leaseId) =>
      (await store).transaction(async (tx) => {
        const open = await tx.execute(
          sql`select 1 from ${creditLease} where ${creditLease.id} = ${leaseId} and ${creditLease.closedAt} is null for update`,
        );
        if (rowsOf(open).length === 0) return false;
        const undone = await tx.execute(sql`
          with gone as (
            delete from ${creditSpend}
            where ${creditSpend.id} = ${id} and ${creditSpend.lease} = ${leaseId} and ${spendGuard("voided")}
            returning ${creditSpend.amount})
          update ${creditLease} set spent = spent - gone.amount from gone where ${creditLease.id} = ${leaseId}
          returning 1`);
        return rowsOf(undone).length > 0;
      }),

    closeLease: async (id) => (await close(id, sql`true`)) ?? 0n,

    async closeAbandonedLeases() {
      const before = new Date(Date.now() - ABANDONED_AFTER_MS);
      const stale = await (await store)
        .select({ id: creditLease.id })
        .from(creditLease)
        .where(and(isNull(creditLease.closedAt), lt(creditLease.renewedAt, before)));
      let closed = 0;
      for (const { id } of stale) if ((await close(id, sql`${creditLease.renewedAt} < ${before}`)) !== null) closed++;
      return closed;
    },

    async lots(owner) {
      const rows = await (await store)
        .select({ lot: creditLot, status: payment.status, transaction: payment.transaction })
        .from(creditLot)
        .leftJoin(
          payment,
          and(
            eq(payment.token, creditLot.token),
            eq(payment.payer, creditLot.payer),
            eq(payment.nonce, creditLot.nonce),
          ),
        )
        .where(eq(creditLot.payer, owner))
        .orderBy(desc(creditLot.createdAt));
      return rows.map(({ lot, status, transaction }) => ({ ...lot, status, transaction }));
    },

    async spending(owner) {
      const day = sql<string>`to_char(${creditSpend.createdAt} at time zone 'UTC', 'YYYY-MM-DD')`;
      const rows = await (await store)
        .select({
          day,
          route: creditSpend.route,
          calls: sql<number>`count(*)::int`,
          amount: sql<string>`sum(${creditSpend.amount})::text`,
        })
        .from(creditSpend)
        .where(and(eq(creditSpend.owner, owner), eq(creditSpend.status, "spent")))
        .groupBy(day, creditSpend.route)
        .orderBy(desc(day), creditSpend.route);
      return rows.map((r) => ({ ...r, calls: Number(r.calls), amount: BigInt(r.amount) }));
    },

    async paidFor(owner, subject, routes, since) {
      const [row] = await (await store)
        .select({ id: creditSpend.id })
        .from(creditSpend)
        .where(
          and(
            eq(creditSpend.owner, owner),
            gt(creditSpend.createdAt, since),
            eq(creditSpend.subject, subject),
            inArray(creditSpend.route, routes),
            eq(creditSpend.status, "spent"),
          ),
        )
        .limit(1);
      return row !== undefined;
    },

    async recent(owner, limit) {
      return (await store)
        .select()
        .from(creditSpend)
        .where(and(eq(creditSpend.owner, owner), eq(creditSpend.status, "spent")))
        .orderBy(desc(creditSpend.createdAt))
        .limit(limit);
    },

    async issueToken(owner, tokenHash) {
      await (await store).insert(creditToken).values({ hash: tokenHash, owner });
    },

    async revokeTokens(owner) {
      const revoked = await (await store)
        .update(creditToken)
        .set({ revokedAt: new Date() })
        .where(and(eq(creditToken.owner, owner), isNull(creditToken.revokedAt)))
        .returning({ hash: creditToken.hash });
      return revoked.length;
    },

    async tokenOwner(tokenHash) {
      const [row] = await (await store)
        .select({ owner: creditToken.owner })
        .from(creditToken)
        .where(and(eq(creditToken.hash, tokenHash), isNull(creditToken.revokedAt)));
      return row?.owner as Address | undefined;
    },
  };
}
