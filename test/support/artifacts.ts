import { tmpdir } from "node:os";

/**
 * Where a test puts what a person looks at after the run (screenshots, statements' PDFs): on disk,
 * outliving the run's temporary directory, which `npm test` keeps in memory and removes at the end
 * (scripts/test.sh sets TEST_ARTIFACTS_DIR to the temporary directory it found: /tmp by default).
 */
export const artifactsDir = (): string => process.env.TEST_ARTIFACTS_DIR || tmpdir();
