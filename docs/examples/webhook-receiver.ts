// A webhook receiver for monitor events: verifies each delivery with the endpoint's secret (the
// `standardwebhooks` package), drops a message it has already handled (same webhook-id), and
// prints each event as one JSON line. Run: WEBHOOK_SECRET=whsec_... npx tsx docs/examples/webhook-receiver.ts [port]
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

const webhook = new Webhook(process.env.WEBHOOK_SECRET!);
const seen = new Set<string>();

const server = createServer(async (req, res) => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks).toString("utf8");
  try {
    // Checks the signature over id.timestamp.body, and that the timestamp is within 5 minutes.
    const event = webhook.verify(body, req.headers as Record<string, string>) as { type: string; data: unknown };
    const id = req.headers["webhook-id"] as string;
    if (!seen.has(id)) {
      seen.add(id);
      console.log(JSON.stringify({ id, ...event }));
    }
    res.writeHead(204).end();
  } catch {
    res.writeHead(400).end("bad signature");
  }
});
server.listen(Number(process.argv[2] ?? 0), "127.0.0.1", () => {
  const address = server.address();
  console.error(`listening on http://127.0.0.1:${typeof address === "object" && address ? address.port : ""}`);
});
