import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { updateEnvFile } from "../config/env-file-update.ts";
import { loadEnvFiles } from "../config/env-files.ts";

/** The directories made, removed once the file's tests ran. */
const made: string[] = [];
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

const dirWith = (files: Record<string, string>) => {
  const dir = mkdtempSync(join(tmpdir(), "env-files-"));
  made.push(dir);
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return dir;
};

// One configuration, read the same way by every entry point: the environment, then .env.local, then .env.
describe(".env and .env.local", () => {
  it("the environment wins over both files, .env.local over .env, and each variable says where it came from", () => {
    const dir = dirWith({ ".env": "A=env\nB=env\nC=env\n# D=commented\n", ".env.local": "B=local\nC=local\n" });
    const env: NodeJS.ProcessEnv = { C: "real", E: "" };
    const origins = loadEnvFiles(dir, env);
    expect(env).toEqual({ A: "env", B: "local", C: "real", E: "" });
    expect(Object.fromEntries(origins)).toEqual({ A: ".env", B: ".env.local" });
  });

  it("a variable set blank in the environment stays blank (unset): a file never fills it", () => {
    const env: NodeJS.ProcessEnv = { PONDER_RPC_URL_42220: "" };
    loadEnvFiles(dirWith({ ".env": "PONDER_RPC_URL_42220=https://celo.example\n" }), env);
    expect(env.PONDER_RPC_URL_42220).toBe("");
  });

  it("reads nothing under ENV_FILES=ignore, which the test suite sets for itself and every process it starts", () => {
    const env: NodeJS.ProcessEnv = { ENV_FILES: "ignore" };
    expect(loadEnvFiles(dirWith({ ".env": "A=1\n", ".env.local": "B=2\n" }), env).size).toBe(0);
    expect(env).toEqual({ ENV_FILES: "ignore" });
    expect(process.env.ENV_FILES).toBe("ignore");
  });

  it("no files, nothing read", () => {
    const env: NodeJS.ProcessEnv = {};
    expect(loadEnvFiles(dirWith({}), env).size).toBe(0);
    expect(env).toEqual({});
  });
});

describe("writing settings into .env", () => {
  it("replaces a variable's line where it stands (its commented default too), appends the others, keeps every other line", () => {
    const dir = dirWith({
      ".env":
        "# the operator's notes\nFOO=bar\n# REPORTER_ADDRESS=\n\nexport REPORTER_START_BLOCK=5\nOTHER=1\nREPORTER_START_BLOCK=6\n",
    });
    updateEnvFile(join(dir, ".env"), { REPORTER_ADDRESS: "0xabc", REPORTER_START_BLOCK: "42", NEW_ONE: "x" });
    expect(readFileSync(join(dir, ".env"), "utf8")).toBe(
      "# the operator's notes\nFOO=bar\nREPORTER_ADDRESS=0xabc\n\nREPORTER_START_BLOCK=42\nOTHER=1\nNEW_ONE=x\n",
    );
  });

  it("creates the file, readable by its owner only", () => {
    const path = join(dirWith({}), ".env");
    updateEnvFile(path, { REPORTER_ADDRESS: "0xabc" });
    expect(readFileSync(path, "utf8")).toBe("REPORTER_ADDRESS=0xabc\n");
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });
});
