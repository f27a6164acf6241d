import { afterEach, describe, expect, it, vi } from "vitest";
import type { SignedSettlement } from "../../api/payments/relayer.ts";
import { SettlementWorker } from "../../api/payments/settlement-worker.ts";
import { PAYER_KEYS, paidRequest, payScreen, SCREEN, sign, World, xPayment } from "./fakes.ts";

// A reconciler (a retry's wait, or another replica's sweep) decides to requeue a deferred row
// "settling without a transaction" from a row read before it asked the chain. If the worker
// records and sends its transaction meanwhile, the requeue must not forget it: the row would go
// back to the queue while its transaction is in flight, its receipt would find it no longer
// settling, and the worker could expire it ("never charged") though the chain charged it, or a
// retry under the same payment-identifier could pay again.

const [alice] = PAYER_KEYS;
afterEach(() => vi.restoreAllMocks());

const flush = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};
const resolvable = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

/**
 * A deferred payment the worker takes, its relayer slow to sign; a retry of it reads the row
 * (settling, no transaction) and, while it asks the chain, the worker records its transaction and
 * sends it (not mined). Then the transaction is mined, and 50 s later (within 30 s of the
 * authorization's validBefore) the worker runs again.
 */
async function staleRequeue(paymentId?: string) {
  const world = new World("deferred");
  const core = world.core();
  const settler = world.settler!;
  const signed = await sign(alice, { validBefore: BigInt(Math.floor(Date.now() / 1000) + 75) });
  await payScreen(core, xPayment(signed, paymentId));
  expect(await world.row(signed)).toMatchObject({ status: "queued" });
  const [taken, gate, recorded] = [resolvable(), resolvable(), resolvable()];
  const submit = settler.submit.bind(settler);
  settler.script = ["hold"];
  settler.submit = async (payload, requirements, record) => {
    taken.resolve();
    await gate.promise;
    return submit(payload, requirements, async (s: SignedSettlement) => {
      await record(s);
      recorded.resolve();
    });
  };
  const run = new SettlementWorker(core).run();
  await taken.promise;
  expect(await world.row(signed)).toMatchObject({ status: "settling", transaction: null });
  const getBlock = world.chain.client.getBlock;
  let first = true;
  world.chain.client.getBlock = async () => {
    if (first) {
      first = false;
      gate.resolve();
      await recorded.promise;
      await flush();
    }
    return getBlock();
  };
  const retry = await core.admit(SCREEN, paidRequest(xPayment(signed, paymentId)));
  await run;
  await flush();
  settler.release();
  await flush();
  settler.submit = submit;
  const now = Date.now();
  vi.spyOn(Date, "now").mockImplementation(() => now + 50_000);
  await new SettlementWorker(core).run();
  await flush();
  return { world, core, signed, retry };
}

describe("a stale requeue while the worker's transaction is in flight", () => {
  it("keeps the row's transaction: never expired (never charged) while the chain charged it", async () => {
    const { world, core, signed, retry } = await staleRequeue();
    // Its transaction is in flight: the retry is told to come back.
    expect("reply" in retry && retry.reply.status).toBe(503);
    expect(world.charged(signed)).toHaveLength(1);
    expect(await world.row(signed)).toMatchObject({ status: "settling", transaction: expect.any(String) });
    // The reconciler asks the chain about it: charged, so settled.
    await core.reconcileUnresolved(0);
    expect((await world.row(signed))?.status).toBe("settled");
    expect(world.charged(signed)).toHaveLength(1);
  });

  it("with a payment-identifier, a retry signed anew gets the earlier payment's answer: the request is charged once", async () => {
    const PID = "stale-requeue-request-01";
    const { world, core, signed } = await staleRequeue(PID);
    const anew = await sign(alice);
    const replayed = await core.admit(SCREEN, paidRequest(xPayment(anew, PID)));
    expect("reply" in replayed && replayed.reply.status, "the earlier payment's answer, again").toBe(200);
    await new SettlementWorker(core).run();
    await flush();
    expect(world.charged(signed).length + world.charged(anew).length).toBe(1);
  });
});
