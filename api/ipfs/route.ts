import type { RouteHandler } from "@hono/zod-openapi";
import { z } from "zod";
import { ApiError } from "../../shared/errors.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute } from "../http/declare.ts";
import type { ServiceDb } from "../store/store.ts";
import { mediaTypeOf } from "./content.ts";
import { type IpfsNode, parseCid } from "./node.ts";

const file = z.string().meta({ format: "binary" });

export const ipfsRoute = declareRoute("ipfs", {
  method: "get",
  path: "/ipfs/{cid}",
  tags: ["IPFS"],
  summary: "Content pinned by the service, by CID",
  description:
    "Serves what the service pinned (statements as PDF and CSV, passport documents as JSON) with the media type recorded when it was pinned " +
    "(or read from the bytes for content pinned without a record). The bytes are checked against the CID before they are sent; " +
    "they never change, so the answer is cacheable for good (Cache-Control: public, max-age=31536000, immutable). " +
    "Only content this service pinned is served: it fetches nothing from the IPFS network.",
  request: {
    params: z.object({
      cid: z
        .string()
        .refine((text) => parseCid(text) !== undefined, "must be a CID (v0 or v1)")
        .describe("A CID (v0 or v1)"),
    }),
  },
  okContent: { "application/pdf": file, "text/csv": file, "application/json": file, "application/octet-stream": file },
  errors: { 400: ["invalid_cid"], 404: ["unknown_cid"] },
});

export type IpfsRouteDeps = { ipfs: Promise<IpfsNode>; store?: Promise<ServiceDb> };

const IMMUTABLE = "public, max-age=31536000, immutable";

export function ipfsHandler({ ipfs, store }: IpfsRouteDeps): RouteHandler<typeof ipfsRoute, AppEnv> {
  return async (c) => {
    const { cid } = c.req.valid("param");
    // The node checks the bytes against the CID, and throws (a 500) rather than serve anything else.
    const bytes = await (await ipfs).get(cid);
    if (!bytes) throw new ApiError(404, "unknown_cid", `This service has not pinned ${cid}.`);
    const type = await mediaTypeOf(await store, parseCid(cid)!.toV1().toString(), bytes);
    return c.body(bytes as Uint8Array<ArrayBuffer>, 200, {
      "content-type": type,
      "content-length": String(bytes.length),
      "cache-control": IMMUTABLE,
      etag: `"${cid}"`,
    });
  };
}
