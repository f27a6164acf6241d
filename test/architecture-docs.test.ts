import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { CONDITIONS, mermaid, PLACES } from "../api/payments/lifecycle.ts";
import { envSchema } from "../config/env.ts";
import { markedBlock } from "./support/examples.ts";

// docs/architecture.md says what the code does: every block it shows is the code's (or is run),
// every file it names exists, and its lists (states, conditions, layer rules, ledger concerns,
// folders, commands) are the code's own.
const root = fileURLToPath(new URL("..", import.meta.url));
const read = (file: string) => readFileSync(new URL(`../${file}`, import.meta.url), "utf8");
const page = read("docs/architecture.md");

/** The fenced block of `lang` between `<!-- name:start -->` and `<!-- name:end -->`. */
const block = (name: string, lang: string) => markedBlock(page, name, lang);
/** Every backticked token of the page. */
const ticked = [...page.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
/** The rows of the markdown table whose header starts with `| first |`, by first cell. */
const tableColumn = (first: string) => {
  const table = new RegExp(`^\\| ${first} \\|.*\\n\\|[-| ]+\\|\\n((?:\\|.*\\n)+)`, "m").exec(page)?.[1] ?? "";
  return table
    .split("\n")
    .filter(Boolean)
    .map((row) => row.split("|")[1]!.trim());
};

describe("docs/architecture.md", () => {
  it("holds only blocks a test checks: the lifecycle diagram, its command and the screen route", () => {
    const fences = [...page.matchAll(/^```(\w*)$/gm)].map((m) => m[1]);
    expect(fences).toEqual(["mermaid", "", "sh", "", "ts", ""]);
    for (const [name, lang] of [
      ["lifecycle", "mermaid"],
      ["lifecycle-command", "sh"],
      ["screen-route", "ts"],
    ]) {
      expect(block(name!, lang!), `a ${lang} block between the ${name} markers`).toBeDefined();
    }
  });

  it("draws the payment lifecycle as api/payments/lifecycle.ts's mermaid() does", () => {
    expect(block("lifecycle", "mermaid")).toBe(`${mermaid()}\n`);
  });

  it("gives a command that prints that diagram", () => {
    const command = block("lifecycle-command", "sh")!.trim();
    expect(command.split("\n")).toHaveLength(1);
    const printed = execFileSync("bash", ["-c", command], {
      cwd: root,
      encoding: "utf8",
      env: { ...process.env, ENV_FILES: "ignore" },
    });
    expect(printed).toBe(`${mermaid()}\n`);
  }, 30_000);

  it("lists the lifecycle's states and conditions", () => {
    expect(tableColumn("state").map((s) => s.replace(/`/g, ""))).toEqual([...PLACES]);
    expect(Object.keys(CONDITIONS).filter((c) => !ticked.includes(c))).toEqual([]);
  });

  it("names the Ledger's concerns as api/payments/ledger/ledger.ts composes them", () => {
    const concerns = /export interface Ledger extends ([\w\s,]+)\{/
      .exec(read("api/payments/ledger/ledger.ts"))?.[1]
      ?.split(",")
      .map((s) => s.trim());
    expect(concerns?.length).toBeGreaterThan(1);
    expect(concerns!.filter((c) => !ticked.includes(c))).toEqual([]);
  });

  it("lists the layer rules of .dependency-cruiser.cjs, and only those", () => {
    const config = createRequire(import.meta.url)(`${root}.dependency-cruiser.cjs`) as {
      forbidden: { name: string }[];
    };
    expect(tableColumn("rule").map((r) => r.replace(/`/g, ""))).toEqual(config.forbidden.map((r) => r.name));
  });

  it("names only files and folders that exist", () => {
    const files = execFileSync("git", ["ls-files"], { cwd: root, encoding: "utf8" }).split("\n");
    const paths = ticked.filter(
      (t) =>
        !t.startsWith("/") &&
        !t.startsWith("@") &&
        /^[\w.-]+(\/[\w.-]*)*$/.test(t) &&
        (t.includes("/") || /\.(ts|cjs|md|sh|jsonc?)$/.test(t)),
    );
    expect(paths.length).toBeGreaterThan(50);
    // A bare file name (claims.ts) is one of a folder named beside it: it must exist somewhere.
    const missing = paths.filter((p) =>
      p.includes("/") ? !existsSync(`${root}${p}`) : !files.some((f) => f.endsWith(`/${p}`) || f === p),
    );
    expect(missing).toEqual([]);
  });

  it("says where each symbol it places is: `name` (`file`) or `name` in `file`", () => {
    const placed = [...page.matchAll(/`([A-Za-z_]\w*)(?:\(\))?`(?: \(| in )`([\w./-]+\.(?:ts|cjs))`/g)].map(
      (m) => [m[1]!, m[2]!] as const,
    );
    expect(placed.length).toBeGreaterThan(15);
    expect(placed.filter(([name, file]) => !new RegExp(`\\b${name}\\b`).test(read(file)))).toEqual([]);
  });

  it("names only environment variables and constants the code has", () => {
    const sources = ["api", "config", "shared", "scripts", "src"].flatMap((dir) =>
      (readdirSync(`${root}${dir}`, { recursive: true }) as string[])
        .filter((f) => /\.(ts|sh|mjs)$/.test(f))
        .map((f) => read(`${dir}/${f}`)),
    );
    const code = sources.join("\n");
    const constants = [...new Set(ticked.filter((t) => /^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$/.test(t)))];
    expect(constants.length).toBeGreaterThan(8);
    expect(constants.filter((name) => !(name in envSchema.shape) && !new RegExp(`\\b${name}\\b`).test(code))).toEqual(
      [],
    );
  });

  it("names only npm scripts package.json has, and the static checks as scripts/test.sh runs them", () => {
    const scripts = (JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts;
    const named = [...page.matchAll(/`npm (?:run ([\w:-]+)|(test))/g)].map((m) => m[1] ?? m[2]!);
    expect(named.filter((s) => !(s in scripts))).toEqual([]);
    const testSh = read("scripts/test.sh");
    const checks = /for check in ([\w ]+); do/.exec(testSh)?.[1]?.split(" ");
    expect(checks?.filter((c) => !named.includes(c))).toEqual([]);
    const setting = /`(static_checks_default=\w+)`/.exec(page)?.[1];
    expect(testSh.split("\n")).toContain(setting);
  });

  it("has every folder of api/ in its table of where things live", () => {
    const folders = tableColumn("folder").flatMap((cell) => [...cell.matchAll(/`([^`]+)\/`/g)].map((m) => m[1]!));
    const apiFolders = readdirSync(`${root}api`, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => `api/${d.name}`);
    expect(apiFolders.filter((f) => !folders.includes(f))).toEqual([]);
    expect(folders.filter((f) => !existsSync(`${root}${f}`))).toEqual([]);
  });

  // "Adding a paid route": its sample is the screen route as the code has it, and the two lines it
  // tells a reader to add are the ones the screen route has.
  it("shows the screen route's declaration and handler as api/screen/route.ts has them", () => {
    expect(read("api/screen/route.ts")).toContain(block("screen-route", "ts"));
  });

  it("names the price and the route list lines the screen route really has", () => {
    expect(page).toContain("(`screen: CENT`)");
    expect(read("api/payments/prices.ts")).toMatch(/^ {2}screen: CENT,$/m);
    expect(page).toContain("`served(screenRoute, screenHandler)`");
    expect(read("api/routes.ts")).toContain("  served(screenRoute, screenHandler),");
  });
});
