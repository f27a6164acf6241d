import type { ReadonlyDrizzle } from "ponder";
import type * as schema from "../ponder.schema.ts";

/**
 * The indexer's tables, read-only: Ponder's API `db`, or a drizzle client over the same schema.
 *
 * Query through the drizzle builder (it qualifies tables with their schema), never raw SQL naming
 * a table bare: on PGlite, Ponder's flushes leave TEMP tables named like ours on the one shared
 * connection, and a bare name resolves to that empty temp table.
 */
export type IndexDb = ReadonlyDrizzle<typeof schema>;
