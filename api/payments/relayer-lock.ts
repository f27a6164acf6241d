import pg from "pg";
import { type Hex, hexToBigInt, keccak256, slice, stringToHex } from "viem";
import { StartupError } from "../../config/errors.ts";
import { sleep } from "../../shared/async.ts";
import { log } from "../../shared/log.ts";

/**
 * One process per relayer key on a database. Each process hands out its relayer's nonces from a
 * counter of its own (api/payments/facilitator.ts), so two processes on one key would send
 * transactions with the same nonce and one of them would be dropped. A self-settling process on
 * Postgres holds a session-level advisory lock named after its relayer, on a connection of its own,
 * for as long as it runs; a second process with the same key finds it taken and refuses to start.
 * (PGlite admits one process, so there is nothing to guard there.)
 */

/** The advisory lock's 64-bit key for a relayer address (advisory locks are per database). */
function relayerLockKey(relayer: Hex): bigint {
  return BigInt.asIntN(64, hexToBigInt(slice(keccak256(stringToHex(`x402 relayer ${relayer.toLowerCase()}`)), 0, 8)));
}

class RelayerInUse extends StartupError {
  constructor(relayer: Hex) {
    super(
      `Another process already settles payments with relayer ${relayer} on this database: its transactions' nonces would collide. ` +
        "Give each replica its own X402_RELAYER_PRIVATE_KEY (funded with CELO for gas), or set X402_FACILITATOR_URL.",
    );
  }
}

/** How long to wait before connecting again after the lock's connection was lost (a Postgres restart). */
const RECONNECT_MS = 1_000;

/** Processes' locks by database and relayer: one process may build several apps on one key. */
const held = new Map<string, Promise<RelayerLock>>();

export type RelayerLock = { key: bigint; release: () => Promise<void> };

/**
 * Takes the relayer's lock, or rejects with RelayerInUse when another session holds it. Until it
 * has answered, Postgres being unreachable is retried. If the connection is lost later, the lock is
 * taken again on a new one (a process that took it meanwhile is logged as an error).
 */
export function holdRelayerLock(connectionString: string, relayer: Hex): Promise<RelayerLock> {
  const id = `${connectionString}\n${relayer.toLowerCase()}`;
  let lock = held.get(id);
  if (!lock) {
    lock = acquire(connectionString, relayer);
    held.set(id, lock);
    lock.catch(() => held.delete(id));
  }
  return lock;
}

async function acquire(connectionString: string, relayer: Hex): Promise<RelayerLock> {
  const key = relayerLockKey(relayer);
  let client: pg.Client | undefined;
  let released = false;

  /** Connects and tries the lock: true when held, false when another session has it. */
  const attempt = async (): Promise<boolean> => {
    const next = new pg.Client({ connectionString, application_name: "x402-relayer-lock" });
    // A lost connection ends the client: 'end' takes it from there.
    next.on("error", () => {});
    try {
      await next.connect();
      const { rows } = await next.query<{ locked: boolean }>("select pg_try_advisory_lock($1::bigint) as locked", [
        key.toString(),
      ]);
      if (!rows[0]?.locked) {
        await next.end();
        return false;
      }
    } catch (error) {
      await next.end().catch(() => {});
      throw error;
    }
    client = next;
    next.once("end", () => {
      if (released || client !== next) return;
      log.warn(`[payments] lost the relayer lock's connection; taking the lock again`);
      void retake();
    });
    return true;
  };

  const retake = async () => {
    for (let logged = false; !released; await sleep(RECONNECT_MS)) {
      try {
        if (await attempt()) return log.info(`[payments] relayer lock taken again for ${relayer}`);
        if (!logged) log.error(`[payments] ${new RelayerInUse(relayer).message}`);
        logged = true;
      } catch {
        /* Postgres not back yet */
      }
    }
  };

  for (let warned = false; ; await sleep(RECONNECT_MS)) {
    try {
      if (await attempt()) break;
      throw new RelayerInUse(relayer);
    } catch (error) {
      if (error instanceof RelayerInUse) throw error;
      if (!warned) log.warn(`[payments] cannot take the relayer lock yet (${(error as Error).message}); retrying`);
      warned = true;
    }
  }
  return {
    key,
    release: async () => {
      released = true;
      await client?.end().catch(() => {});
    },
  };
}

/**
 * The relayer lock a process must hold (the host takes it at start and exits when another process
 * has it): a self-settling process on Postgres. None with a remote facilitator or on PGlite.
 */
export function relayerLockFor(
  facilitator: { mode: string; relayer?: Hex },
  database: { kind: string; connectionString?: string } | undefined,
): { connectionString: string; address: Hex } | undefined {
  if (
    facilitator.mode !== "self" ||
    !facilitator.relayer ||
    database?.kind !== "postgres" ||
    !database.connectionString
  )
    return undefined;
  return { connectionString: database.connectionString, address: facilitator.relayer };
}
