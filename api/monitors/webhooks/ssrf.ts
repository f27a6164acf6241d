import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";

export type UrlCheck = { ok: true } | { ok: false; reason: string };

/**
 * Addresses a webhook must not reach: the service's own host and network, the cloud metadata
 * service (169.254.169.254) and other internal ones. BlockList also matches the IPv4-mapped IPv6
 * form (::ffff:127.0.0.1) of an IPv4 rule.
 */
const INTERNAL: [name: string, prefix: string, bits: number, family: "ipv4" | "ipv6"][] = [
  ["unspecified", "0.0.0.0", 8, "ipv4"],
  ["private", "10.0.0.0", 8, "ipv4"],
  ["shared (CGNAT)", "100.64.0.0", 10, "ipv4"],
  ["loopback", "127.0.0.0", 8, "ipv4"],
  ["link-local", "169.254.0.0", 16, "ipv4"],
  ["private", "172.16.0.0", 12, "ipv4"],
  ["reserved", "192.0.0.0", 24, "ipv4"],
  ["private", "192.168.0.0", 16, "ipv4"],
  ["benchmarking", "198.18.0.0", 15, "ipv4"],
  ["multicast", "224.0.0.0", 4, "ipv4"],
  ["reserved", "240.0.0.0", 4, "ipv4"],
  ["unspecified", "::", 128, "ipv6"],
  ["loopback", "::1", 128, "ipv6"],
  ["private", "fc00::", 7, "ipv6"],
  ["link-local", "fe80::", 10, "ipv6"],
  ["multicast", "ff00::", 8, "ipv6"],
];

const blocked = new Map<string, BlockList>();
for (const [name, prefix, bits, family] of INTERNAL) {
  const list = blocked.get(name) ?? new BlockList();
  list.addSubnet(prefix, bits, family);
  blocked.set(name, list);
}

/** Why the address is internal (loopback, private, …), or undefined for a public one. */
function internal(address: string): string | undefined {
  const family = isIP(address) === 6 ? "ipv6" : "ipv4";
  for (const [name, list] of blocked) if (list.check(address, family)) return name;
  return undefined;
}

/**
 * Whether a webhook may be sent to `url`: http or https, no credentials, and a host whose every
 * address is public (unless `allowPrivate`, for local receivers in development and tests).
 * Checked when an endpoint is registered and again before each delivery, since what a name
 * resolves to may change after registration.
 */
export async function checkEndpointUrl(url: string, { allowPrivate }: { allowPrivate: boolean }): Promise<UrlCheck> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, reason: "not a valid URL" };
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return { ok: false, reason: "only http and https" };
  if (parsed.username || parsed.password) return { ok: false, reason: "credentials in the URL are not allowed" };
  if (allowPrivate) return { ok: true };
  const host = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
  let addresses: { address: string }[];
  try {
    addresses = await lookup(host, { all: true, verbatim: true });
  } catch (error) {
    return { ok: false, reason: `the host does not resolve (${(error as NodeJS.ErrnoException).code ?? "error"})` };
  }
  if (!addresses.length) return { ok: false, reason: "the host does not resolve" };
  for (const { address } of addresses) {
    const kind = internal(address);
    if (kind) return { ok: false, reason: `the host resolves to a ${kind} address (${address})` };
  }
  return { ok: true };
}
