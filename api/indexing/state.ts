import { type PublicClient, withTimeout } from "viem";
import { z } from "zod";
import type { IndexTarget } from "../../config/target.ts";
import { etaSeconds, SlidingRate } from "../../shared/rate.ts";
import { type IndexDb, queryPrepared } from "../db.ts";
import { decodeCheckpoint } from "../stats/queries.ts";
import { coalesced } from "../store/coalesce.ts";

/** How the chain head is read: shared by every caller for this long, and given up on after HEAD_TIMEOUT_MS. */
const HEAD_TTL_MS = 1_000;
const HEAD_TIMEOUT_MS = 2_000;
/** Backfill speed is measured over the checkpoints seen in this window. */
const RATE_WINDOW_MS = 60_000;

const blockSchema = z.object({ number: z.number().int(), timestamp: z.number().int() });

/** Where indexing stands, as paid routes decide from it (and free routes report it). */
export const indexStatusSchema = z.object({
  ready: z
    .boolean()
    .describe("The backfill is done (Ponder's own flag in the database: false again during a crash recovery)"),
  current: z
    .boolean()
    .describe("Ready, and the indexed block is within maxLagBlocks of the chain head: paid routes answer only then"),
  startBlock: z
    .number()
    .int()
    .describe("The first block indexed (CELO_START_BLOCK; on the devnet, its deployment block)"),
  indexedBlock: blockSchema
    .nullable()
    .describe("The block the indexed tables hold, read from the database (null before the first one)"),
  headBlock: blockSchema.nullable().describe("The chain head (null when the RPC does not answer)"),
  lagBlocks: z.number().int().nullable().describe("Blocks left to index: the head minus the indexed block"),
  maxLagBlocks: z.number().int(),
  percent: z.number().describe("Share of the blocks from the start block to the head that are indexed"),
  blocksPerSecond: z
    .number()
    .nullable()
    .describe("Blocks indexed a second over the last minute this process saw (null until it has seen two readings)"),
  etaSeconds: z
    .number()
    .int()
    .nullable()
    .describe("Estimated time until the index is current, from the recent indexing speed (null when unknown)"),
  reason: z.string().optional().describe("Why the index is not current"),
});
export type IndexStatus = z.infer<typeof indexStatusSchema>;

export type IndexStateDeps = {
  db: IndexDb;
  target: Pick<IndexTarget, "schema"> & Partial<Pick<IndexTarget, "startBlock">>;
  chain?: Pick<PublicClient, "getBlock">;
  maxLagBlocks: number;
};

type Block = z.infer<typeof blockSchema>;

/**
 * Whether the index can back a paid answer: Ponder's `is_ready` (set once the backfill is done,
 * cleared again while a crash recovery re-indexes) and its committed checkpoint, read from the
 * database in one statement, so that replicas decide from the shared database and no figure
 * survives a restart; and the chain head, read at most once per HEAD_TTL_MS for all callers.
 */
export class IndexState {
  private head?: { at: number; value: Promise<Block | null> };
  private readonly speed = new SlidingRate(RATE_WINDOW_MS);
  private lastCheckpoint?: string;

  constructor(private readonly deps: IndexStateDeps) {}

  async status(): Promise<IndexStatus> {
    const [indexed, head] = await Promise.all([this.indexed(undefined), this.chainHead()]);
    const { maxLagBlocks } = this.deps;
    const block = indexed.block;
    if (block) this.speed.add(block.number);
    const perSecond = this.speed.perSecond();
    const lagBlocks = block && head ? Math.max(0, head.number - block.number) : null;
    const start = this.deps.target.startBlock ?? 0;
    const span = head ? head.number - start : 0;
    const percent = !block
      ? 0
      : span <= 0
        ? 100
        : Math.min(100, Math.round((1000 * (block.number - start)) / span) / 10);
    const reason = !indexed.ready
      ? block
        ? "the backfill is not finished"
        : "nothing is indexed yet"
      : !head
        ? "the chain head cannot be read, so how current the index is is unknown"
        : lagBlocks! > maxLagBlocks
          ? `the index is ${lagBlocks} blocks behind the chain head (at most ${maxLagBlocks})`
          : undefined;
    return {
      ready: indexed.ready,
      current: reason === undefined,
      startBlock: start,
      indexedBlock: block,
      headBlock: head,
      lagBlocks,
      maxLagBlocks,
      percent,
      blocksPerSecond: perSecond === null ? null : Math.round(perSecond * 10) / 10,
      etaSeconds: reason === undefined ? 0 : lagBlocks === null ? null : etaSeconds(lagBlocks, perSecond),
      ...(reason ? { reason } : {}),
    };
  }

  /**
   * The checkpoint of the latest state read (every paid call's gate reads one): what the indexed
   * tables held then. Undefined before the first read.
   */
  checkpoint(): string | undefined {
    return this.lastCheckpoint;
  }

  /**
   * Ponder's flag and checkpoints. While not ready (a crash recovery has reverted the tables to the
   * safe checkpoint and not yet rewritten `latest_checkpoint`), the data is at the safe checkpoint.
   */
  /**
   * Group read: the paid calls of a moment share one statement, each reading a state read after
   * it asked (the calls that arrive while one read runs go together in the next).
   */
  private readonly indexed = coalesced(async (callers: unknown[]) => {
    const state = await this.readIndexed();
    return callers.map(() => state);
  });

  private async readIndexed(): Promise<{ ready: boolean; block: Block | null }> {
    const { db, target } = this.deps;
    const rows = await queryPrepared<{ ready: number | null; latest: string | null; safe: string | null }>(
      db,
      `index_state:${target.schema}`,
      `select (select (value->>'is_ready')::int from "${target.schema}"._ponder_meta where key = 'app') as ready,
              (select latest_checkpoint from "${target.schema}"._ponder_checkpoint limit 1) as latest,
              (select safe_checkpoint from "${target.schema}"._ponder_checkpoint limit 1) as safe`,
      [],
    ).catch(() => []); // Ponder has not created its tables yet
    const row = rows[0];
    const ready = row?.ready === 1;
    const checkpoint = ready ? row?.latest : row?.safe;
    this.lastCheckpoint = checkpoint ?? undefined;
    if (!checkpoint) return { ready: false, block: null };
    const { blockNumber, timestamp } = decodeCheckpoint(checkpoint);
    return {
      ready: ready && Boolean(row?.latest),
      block: { number: Number(blockNumber), timestamp: Number(timestamp) },
    };
  }

  private chainHead(): Promise<Block | null> {
    const { chain } = this.deps;
    if (!chain) return Promise.resolve(null);
    if (!this.head || Date.now() - this.head.at > HEAD_TTL_MS) {
      const value = withTimeout(() => chain.getBlock({ blockTag: "latest" }), { timeout: HEAD_TIMEOUT_MS }).then(
        (b) => ({ number: Number(b.number), timestamp: Number(b.timestamp) }),
        () => null,
      );
      this.head = { at: Date.now(), value };
    }
    return this.head.value;
  }
}
