import { html, raw } from "hono/html";
import type { HistoryPoint } from "../wallet/history.ts";
import type { PassportStatus, VerifyResult } from "./schema.ts";

/** What a person reads for each status: the badge's word and colour. */
const STATUS_LOOK: Record<PassportStatus, { label: string; color: string }> = {
  confirmed: { label: "valid", color: "#2e7d32" },
  pending: { label: "pending", color: "#ef6c00" },
  revoked: { label: "revoked", color: "#c62828" },
  expired: { label: "expired", color: "#6d6d6d" },
  superseded: { label: "superseded", color: "#5c6bc0" },
  tampered: { label: "tampered", color: "#b71c1c" },
  not_found: { label: "not found", color: "#6d6d6d" },
};

const esc = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
const day = (iso: string | null) => (iso ? iso.slice(0, 10) : "never");

/** A small shields-style SVG badge: "passport | valid". */
export function badgeSvg(status: PassportStatus, reportId: string | null): string {
  const { label, color } = STATUS_LOOK[status];
  const left = "passport";
  const lw = 64;
  const rw = Math.max(48, 8 + label.length * 7);
  const title = `${reportId ?? "passport"}: ${label}`;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${lw + rw}" height="20" role="img" aria-label="${esc(title)}"><title>${esc(title)}</title><rect width="${lw}" height="20" fill="#555"/><rect x="${lw}" width="${rw}" height="20" fill="${color}"/><g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11"><text x="${lw / 2}" y="14">${left}</text><text x="${lw + rw / 2}" y="14">${esc(label)}</text></g></svg>`;
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
/** "2026-03" -> "Mar 26". */
const monthLabel = (month: string) => `${MONTHS[Number(month.slice(5, 7)) - 1] ?? month} ${month.slice(2, 4)}`;

/** The 12-month score history as an inline SVG line chart (financial health and reputation, 0-100). */
function historyChart(history: HistoryPoint[]): string {
  if (history.length === 0) return "";
  const W = 640;
  const H = 220;
  const pad = { l: 36, r: 24, t: 12, b: 36 };
  const x = (i: number) => pad.l + (i * (W - pad.l - pad.r)) / Math.max(1, history.length - 1);
  const y = (v: number) => pad.t + ((100 - v) * (H - pad.t - pad.b)) / 100;
  const line = (key: "financialHealth" | "reputation") =>
    history.map((p, i) => `${x(i).toFixed(1)},${y(p[key]).toFixed(1)}`).join(" ");
  const grid = [0, 25, 50, 75, 100]
    .map(
      (v) =>
        `<line x1="${pad.l}" x2="${W - pad.r}" y1="${y(v)}" y2="${y(v)}" stroke="#e0e0e0"/><text x="${pad.l - 6}" y="${y(v) + 4}" text-anchor="end" font-size="10" fill="#666">${v}</text>`,
    )
    .join("");
  const labels = history
    .map(
      (p, i) =>
        `<text x="${x(i)}" y="${H - pad.b + 16}" text-anchor="middle" font-size="10" fill="#666">${esc(monthLabel(p.month))}</text>`,
    )
    .join("");
  const dots = (key: "financialHealth" | "reputation", color: string) =>
    history
      .map(
        (p, i) =>
          `<circle cx="${x(i).toFixed(1)}" cy="${y(p[key]).toFixed(1)}" r="3" fill="${color}"><title>${esc(p.month)}: ${p[key]}</title></circle>`,
      )
      .join("");
  return `<svg id="history-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="Scores at each of the last 12 month ends">${grid}${labels}<polyline fill="none" stroke="#1565c0" stroke-width="2" points="${line("financialHealth")}"/><polyline fill="none" stroke="#8e24aa" stroke-width="2" points="${line("reputation")}"/>${dots("financialHealth", "#1565c0")}${dots("reputation", "#8e24aa")}<g font-size="11"><rect x="${pad.l + 8}" y="${H - 14}" width="10" height="3" fill="#1565c0"/><text x="${pad.l + 22}" y="${H - 9}">financial health</text><rect x="${pad.l + 130}" y="${H - 14}" width="10" height="3" fill="#8e24aa"/><text x="${pad.l + 144}" y="${H - 9}">reputation</text></g></svg>`;
}

/** The page a person reads at a passport's verifyUrl (server-rendered; no script, nothing fetched from elsewhere). */
export function passportPage(v: VerifyResult, history: HistoryPoint[]) {
  const look = STATUS_LOOK[v.status];
  const doc = v.report;
  const loan = doc
    ? `$${doc.loanCapacity.minUsd.toLocaleString("en-US")} to $${doc.loanCapacity.maxUsd.toLocaleString("en-US")} (${doc.loanCapacity.confidence} confidence)`
    : (v.loanCapacity ?? "unknown");
  const a = v.attestation;
  const rows: [string, string, string][] = [
    ["wallet", "Wallet", v.walletAddress ?? "-"],
    ["buyer", "Bought by", v.buyer ?? "-"],
    ["loan", "Loan capacity", loan],
    ["issued", "Issued", day(v.issuedAt)],
    ["expires", "Expires", day(v.expiresAt)],
    ["transaction", "Transaction", a?.transaction ?? "not indexed yet"],
    ["block", "Block", a?.block === null || a?.block === undefined ? "not indexed yet" : String(a.block)],
    [
      "contract",
      "Reporter contract",
      a
        ? `${a.contract} (chain ${a.chainId}, ${v.source === "onchain-reporter" ? "original OnchainReporter" : "ReputationReporter"})`
        : "-",
    ],
    ["cid", "IPFS CID", v.ipfsCid ?? v.reportHash ?? "-"],
  ];
  if (v.revokedAt) rows.push(["revoked", "Revoked", `${day(v.revokedAt)}: ${v.revocationReason}`]);
  if (v.supersededBy) rows.push(["superseded-by", "Superseded by", v.supersededBy]);
  if (v.supersedes) rows.push(["supersedes", "Supersedes", v.supersedes]);
  const title = `Passport ${v.reportId ?? v.id}: ${look.label}`;
  return html`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${title}</title>
    <style>
      body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; background: #f5f6f8; color: #1d1d1f; }
      main { max-width: 760px; margin: 32px auto; background: #fff; border-radius: 12px; padding: 28px 32px; box-shadow: 0 1px 4px rgba(0,0,0,.08); }
      h1 { font-size: 22px; margin: 0 0 6px; }
      .badge { display: inline-block; padding: 4px 12px; border-radius: 999px; color: #fff; font-weight: 600; font-size: 14px; letter-spacing: .02em; }
      .reason { color: #555; margin: 10px 0 20px; }
      .scores { display: flex; gap: 16px; margin: 16px 0; }
      .score { flex: 1; border: 1px solid #e5e5e5; border-radius: 10px; padding: 12px 16px; }
      .score b { display: block; font-size: 34px; }
      table { border-collapse: collapse; width: 100%; font-size: 14px; }
      th { text-align: left; color: #666; font-weight: 500; width: 170px; vertical-align: top; padding: 6px 0; }
      td { padding: 6px 0; word-break: break-all; font-family: ui-monospace, Menlo, monospace; font-size: 13px; }
      h2 { font-size: 16px; margin: 26px 0 8px; }
      code { background: #f0f0f0; padding: 1px 4px; border-radius: 4px; font-size: 12px; word-break: break-all; }
      li { margin: 6px 0; font-size: 14px; }
    </style>
  </head>
  <body>
    <main>
      <h1>Wallet passport <span id="report-id">${v.reportId ?? v.id}</span></h1>
      <span id="status" class="badge" data-status="${v.status}" style="background:${look.color}">${look.label}</span>
      <p class="reason" id="reason">${v.reason}</p>
      ${
        v.scores
          ? html`<div class="scores">
            <div class="score">Financial health<b id="score-financial-health">${v.scores.financialHealth}</b></div>
            <div class="score">Reputation<b id="score-reputation">${v.scores.reputation}</b></div>
          </div>`
          : ""
      }
      <table>
        ${rows.map(([id, label, value]) => html`<tr><th>${label}</th><td id="${id}">${value}</td></tr>`)}
      </table>
      ${
        history.length
          ? html`<h2>Score history (last 12 month ends)</h2>
            ${raw(historyChart(history))}`
          : ""
      }
      ${
        v.howToVerify
          ? html`<h2>Check it yourself</h2>
            <ul>
              <li>On chain: <code>${v.howToVerify.contractCall}</code></li>
              ${v.howToVerify.ipfs ? html`<li>Content: <code>${v.howToVerify.ipfs}</code></li>` : ""}
              <li>As JSON: <code>GET ${v.verifyUrl ?? ""}</code> with <code>Accept: application/json</code></li>
            </ul>`
          : ""
      }
      <p style="color:#888;font-size:12px">Judged from the indexed chain${v.asOf ? ` as of block ${v.asOf.block} (${v.asOf.time})` : ""}.</p>
    </main>
  </body>
</html>`;
}
