// The baseline stores the same transfer rows as the real indexer (same table, same indexes) and
// nothing else.
export { transfer } from "../../ponder.schema.ts";
