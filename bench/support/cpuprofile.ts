import { readFileSync } from "node:fs";

type Node = {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
};
type Profile = { nodes: Node[]; startTime: number; endTime: number; samples: number[]; timeDeltas: number[] };

/** Where a frame's code comes from: a package under node_modules, node's own, the project, or the engine. */
function origin(url: string, functionName: string): string {
  if (!url) return functionName.startsWith("(") ? functionName : "(native/engine)";
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith("node:")) return "node:internal";
  if (url.includes("/src/") || url.includes("/api/") || url.includes("/config/") || url.includes("/shared/"))
    return "project";
  if (url.startsWith("wasm")) return "wasm";
  return url.split("/").slice(-2).join("/");
}

/**
 * Self time of a V8 CPU profile (node --cpu-prof) by origin and by function, optionally only over
 * samples taken between `fromUs` and `toUs` (microseconds on the profile's clock).
 */
export function summarizeProfile(path: string, top = 15, window?: { fromS: number; toS: number }): string {
  const profile = JSON.parse(readFileSync(path, "utf8")) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i]!;
    const delta = profile.timeDeltas[i + 1] ?? 0;
    const at = (t - profile.startTime) / 1e6;
    if (window && (at < window.fromS || at > window.toS)) continue;
    self.set(profile.samples[i]!, (self.get(profile.samples[i]!) ?? 0) + delta);
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const byOrigin = new Map<string, number>();
  const byFunction = new Map<string, number>();
  for (const [id, us] of self) {
    const node = byId.get(id)!;
    const o = origin(node.callFrame.url, node.callFrame.functionName);
    byOrigin.set(o, (byOrigin.get(o) ?? 0) + us);
    const f = `${node.callFrame.functionName || "(anonymous)"} ${o}${node.callFrame.url && !node.callFrame.url.startsWith("node:") ? `:${node.callFrame.lineNumber + 1}` : ""}`;
    byFunction.set(f, (byFunction.get(f) ?? 0) + us);
  }
  const share = (us: number) =>
    `${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / 1e6).toFixed(1).padStart(6)} s`;
  const span = window
    ? ` between ${window.fromS.toFixed(0)} s and ${window.toS.toFixed(0)} s after the process started`
    : "";
  const lines = [
    `CPU profile ${path}: ${(total / 1e6).toFixed(1)} s sampled${span} (whole profile ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s)`,
    "self time by origin:",
  ];
  for (const [o, us] of [...byOrigin].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${share(us)}  ${o}`);
  lines.push("self time by function:");
  for (const [f, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${share(us)}  ${f}`);
  return lines.join("\n");
}

if (process.argv[1]?.endsWith("cpuprofile.ts") && process.argv[2])
  console.log(
    summarizeProfile(
      process.argv[2],
      Number(process.argv[3] ?? 25),
      process.argv[5] ? { fromS: Number(process.argv[4]), toS: Number(process.argv[5]) } : undefined,
    ),
  );
