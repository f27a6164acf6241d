import type { ReadonlyDrizzle } from "ponder";
import type * as schema from "../ponder.schema.ts";

/** The indexer's tables, read-only: Ponder's API `db`, or a drizzle client over the same schema. */
export type IndexDb = ReadonlyDrizzle<typeof schema>;
