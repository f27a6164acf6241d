import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** An empty PGlite cluster made once per run: slots copy it instead of each running initdb (~3 CPU-s). */
    pgliteTemplate: string;
  }
}

/** vitest globalSetup of the pglite project. */
export default async function setup(project: TestProject): Promise<() => void> {
  const dir = mkdtempSync(join(tmpdir(), "pglite-template-"));
  const db = new PGlite(dir);
  await db.waitReady;
  await db.close();
  project.provide("pgliteTemplate", dir);
  return () => rmSync(dir, { recursive: true, force: true });
}
