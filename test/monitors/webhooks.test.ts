import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { webhookMessage } from "../../api/monitors/webhooks/message.ts";
import { nextAttemptAt, retryAfterMs } from "../../api/monitors/webhooks/schedule.ts";
import { newEndpointSecret } from "../../api/monitors/webhooks/secret.ts";
import { checkEndpointUrl } from "../../api/monitors/webhooks/ssrf.ts";

// The webhook engine's pure parts. The worker and the endpoint store: test/db/webhooks.test.ts.

describe("endpoint secrets", () => {
  it("are whsec_ and the base64 of 24 random bytes, and sign for standardwebhooks", () => {
    const secret = newEndpointSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(Buffer.from(secret.slice(6), "base64")).toHaveLength(24);
    expect(newEndpointSecret()).not.toBe(secret);
  });
});

describe("the message", () => {
  const event = {
    seq: 1,
    id: "evt_1",
    owner: "0xowner",
    monitorId: "mon_1",
    wallet: "0xwallet",
    type: "score.threshold_crossed",
    before: { score: 70 },
    after: { score: 40 },
    block: "123456",
    blockHash: "0xhash",
    modelVersion: "m1",
    retracts: null,
    createdAt: new Date("2026-11-25T01:02:03.000Z"),
  };

  it("carries the event as Standard Webhooks JSON, with the headers a receiver verifies", () => {
    const secret = newEndpointSecret();
    const sentAt = new Date();
    const { body, headers } = webhookMessage(event, { secret, previousSecret: null, previousUntil: null }, sentAt);
    expect(JSON.parse(body)).toEqual({
      type: "score.threshold_crossed",
      timestamp: "2026-11-25T01:02:03.000Z",
      data: {
        id: "evt_1",
        monitorId: "mon_1",
        wallet: "0xwallet",
        before: { score: 70 },
        after: { score: 40 },
        block: 123456,
        blockHash: "0xhash",
        modelVersion: "m1",
        retracts: null,
      },
    });
    expect(headers).toMatchObject({
      "content-type": "application/json",
      "user-agent": expect.stringContaining("celo-wallet-reputation"),
      "webhook-id": "evt_1",
      "webhook-timestamp": String(Math.floor(sentAt.getTime() / 1000)),
    });
    expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
  });

  it("is signed by the previous secret too until previous_until, and then by the current one only", () => {
    const [secret, previousSecret] = [newEndpointSecret(), newEndpointSecret()];
    const sentAt = new Date();
    const during = webhookMessage(
      event,
      { secret, previousSecret, previousUntil: new Date(sentAt.getTime() + 60_000) },
      sentAt,
    );
    const signatures = during.headers["webhook-signature"]!.split(" ");
    expect(signatures).toHaveLength(2);
    for (const [key, signature] of [
      [secret, signatures[0]!],
      [previousSecret, signatures[1]!],
    ] as const) {
      const one = { ...during.headers, "webhook-signature": signature };
      expect(() => new Webhook(key).verify(during.body, one)).not.toThrow();
    }
    expect(() =>
      new Webhook(secret).verify(during.body, { ...during.headers, "webhook-signature": signatures[1]! }),
    ).toThrow();
    const after = webhookMessage(event, { secret, previousSecret, previousUntil: sentAt }, sentAt);
    expect(after.headers["webhook-signature"]!.split(" ")).toHaveLength(1);
    expect(() => new Webhook(previousSecret).verify(after.body, after.headers)).toThrow();
  });
});

describe("the retry schedule", () => {
  const now = new Date("2026-01-01T00:00:00Z");
  const delay = (attempts: number, random: number, retryAfter?: number) =>
    (nextAttemptAt(attempts, now, retryAfter, () => random)?.getTime() ?? Number.NaN) - now.getTime();

  it("retries at 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 24 h, ±20 %, then gives up", () => {
    const expected = [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400].map((s) => s * 1000);
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => delay(n, 0.5))).toEqual(expected);
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => delay(n, 0))).toEqual(expected.map((ms) => ms * 0.8));
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => delay(n, 1))).toEqual(expected.map((ms) => ms * 1.2));
    const total = expected.reduce((a, b) => a + b, 0);
    expect(total / 86_400_000).toBeGreaterThan(3);
    expect(total / 86_400_000).toBeLessThan(3.5);
    expect(nextAttemptAt(10, now)).toBeNull();
  });

  it("waits at least a Retry-After (seconds or an HTTP date), at most a day", () => {
    expect(retryAfterMs("120", now)).toBe(120_000);
    expect(retryAfterMs(new Date(now.getTime() + 90_000).toUTCString(), now)).toBe(90_000);
    expect(retryAfterMs(new Date(now.getTime() - 90_000).toUTCString(), now)).toBe(0);
    expect(retryAfterMs("soon", now)).toBeUndefined();
    expect(retryAfterMs(null, now)).toBeUndefined();
    expect(delay(1, 1, 120_000)).toBe(120_000);
    expect(delay(5, 1, 120_000)).toBe(18000 * 1200);
    expect(delay(1, 0.5, 7 * 86_400_000)).toBe(86_400_000);
  });
});

describe("endpoint URLs (SSRF)", () => {
  const refused = async (url: string) => {
    const check = await checkEndpointUrl(url, { allowPrivate: false });
    return check.ok ? undefined : check.reason;
  };

  it("refuses loopback, private, link-local (metadata), CGNAT, multicast and mapped addresses", async () => {
    for (const [url, kind] of [
      ["http://127.0.0.1/hook", "loopback"],
      ["http://10.0.0.1/hook", "private"],
      ["http://172.20.1.1/hook", "private"],
      ["http://192.168.1.1/hook", "private"],
      ["http://169.254.169.254/latest/meta-data", "link-local"],
      ["http://100.64.0.1/hook", "CGNAT"],
      ["http://224.0.0.1/hook", "multicast"],
      ["http://0.0.0.0/hook", "unspecified"],
      ["http://[::1]/hook", "loopback"],
      ["http://[::]/hook", "unspecified"],
      ["http://[fd00::1]/hook", "private"],
      ["http://[fe80::1]/hook", "link-local"],
      ["http://[::ffff:127.0.0.1]/hook", "loopback"],
      ["http://[::ffff:169.254.169.254]/hook", "link-local"],
      ["http://2130706433/hook", "loopback"],
      ["https://localhost:8443/hook", "loopback"],
    ])
      expect(await refused(url!), url).toContain(kind);
  });

  it("refuses credentials, other schemes and what is not a URL, even with allowPrivate", async () => {
    for (const allowPrivate of [false, true]) {
      const reason = async (url: string) => {
        const check = await checkEndpointUrl(url, { allowPrivate });
        return check.ok ? undefined : check.reason;
      };
      expect(await reason("https://user:pass@93.184.216.34/hook")).toContain("credentials");
      expect(await reason("https://user@93.184.216.34/hook")).toContain("credentials");
      expect(await reason("ftp://93.184.216.34/hook")).toContain("http");
      expect(await reason("file:///etc/passwd")).toContain("http");
      expect(await reason("not a url")).toContain("URL");
    }
  });

  it("lets a public address through, and private ones with allowPrivate", async () => {
    expect(await checkEndpointUrl("https://93.184.216.34/hook", { allowPrivate: false })).toEqual({ ok: true });
    expect(await checkEndpointUrl("http://[2606:2800:220:1::]/hook", { allowPrivate: false })).toEqual({ ok: true });
    expect(await checkEndpointUrl("http://127.0.0.1:8080/hook", { allowPrivate: true })).toEqual({ ok: true });
  });
});
