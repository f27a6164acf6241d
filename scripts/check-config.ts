// npm run check:config: checks the whole configuration at once (the environment with .env.local
// and .env, the RPC, Postgres, the contracts, the keys' gas and the reporter role) and prints what
// `npm start` would run. Exit code 1 when anything is an error, 0 otherwise. Keys are never
// printed, only their addresses.
import { checkConfig, type Finding } from "../config/check.ts";
import { describePlan } from "../config/plan.ts";
import { firstLine } from "../shared/async.ts";
import { ponderArgs } from "./ponder-command.ts";

async function main(): Promise<number> {
  const check = await checkConfig({ devnet: "not started" });
  const table = (rows: [string, string][]) => {
    const width = Math.max(...rows.map(([label]) => label.length));
    return rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`);
  };
  const count = (level: Finding["level"]) => check.findings.filter((f) => f.level === level).length;
  const [errors, warnings] = [count("error"), count("warn")];
  console.log(
    [
      "Configuration",
      ...table(check.findings.map((f) => [f.level.padEnd(5), `${f.check}: ${f.message}`])),
      "",
      "What `npm start` would run",
      ...table(describePlan(check, (schema) => ponderArgs("start", schema, check.env.PORT, process.env))),
      "",
      errors
        ? `${errors} ${errors === 1 ? "error" : "errors"}${warnings ? `, ${warnings} ${warnings === 1 ? "warning" : "warnings"}` : ""}: \`npm start\` would stop.`
        : `Ready to start${warnings ? ` (${warnings} ${warnings === 1 ? "warning" : "warnings"})` : ""}.`,
    ].join("\n"),
  );
  return errors ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`check:config failed: ${firstLine(error)}`);
    process.exit(1);
  },
);
