import { afterEach, describe, expect, it, vi } from "vitest";
import { healthHandler, healthRoute } from "../api/health/route.ts";
import { mount } from "../api/http/mount.ts";
import type { IpfsNode } from "../api/ipfs/node.ts";
import { alwaysCurrent } from "../harness/index-db.ts";
import { World } from "./payments/fakes.ts";
import { paidApp } from "./support/paid-app.ts";

// GET /api/health/integrations and the service's IPFS node, which opens on its first use (Helia and
// its stores: a second, several under load). A check that finds it still opening says so (degraded,
// answered within the 3 s every check has), not that it is down; past a minute without an answer
// it is down.

afterEach(() => void vi.useRealTimers());

/** A node whose opening ends when `open()` is called (never, unless it is). */
function openingNode(): { node: IpfsNode; open: () => void } {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  const node: IpfsNode = {
    add: async () => {
      await opened;
      return "bafkreiprobe";
    },
    get: async () => undefined as never,
    pinnedCount: async () => 1,
    close: async () => {},
  };
  return { node, open };
}

function healthApp(node: IpfsNode) {
  const core = new World("before-self").core();
  const chain = { getBlock: async () => ({ number: 7n }) } as never;
  return paidApp(core, (app) =>
    mount(
      app,
      healthRoute,
      healthHandler({ chain, index: alwaysCurrent, payments: core, ipfs: Promise.resolve(node) }),
    ),
  );
}

/** One health call, the fake clock moved past the checks' 3 s. */
async function ipfsCheck(app: ReturnType<typeof healthApp>) {
  const answered = app.request("/api/health/integrations");
  await vi.advanceTimersByTimeAsync(3_100);
  const body = (await (await answered).json()) as { integrations: { ipfs: Record<string, unknown> } };
  return body.integrations.ipfs;
}

describe("health of the IPFS node, which opens on first use", () => {
  it("says it is opening (degraded), then ok once it answers", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const { node, open } = openingNode();
    const app = healthApp(node);
    expect(await ipfsCheck(app)).toMatchObject({ status: "degraded", opening: true });
    open();
    expect(await ipfsCheck(app)).toMatchObject({ status: "ok", writable: true, pinnedCount: 1 });
  });

  it("calls a node that has not answered within a minute of the first check down", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const app = healthApp(openingNode().node);
    expect(await ipfsCheck(app)).toMatchObject({ status: "degraded", opening: true });
    vi.setSystemTime(Date.now() + 61_000);
    expect(await ipfsCheck(app)).toMatchObject({ status: "down", error: "timeout after 3000 ms" });
  });
});
