import pdfmake from "pdfmake";
import type { StatementData, StatementPeriod } from "./data.ts";
import { formatAmount, shortHash, utcDate, utcDateTime } from "./format.ts";

// pdfmake 0.3 in Node (PITFALLS.md): the 14 standard PDF fonts by name (nothing embedded, WinAnsi
// text only), no URL ever fetched, no local file read except those font names.
const HELVETICA = { normal: "Helvetica", bold: "Helvetica-Bold", italics: "Helvetica-Oblique", bolditalics: "Helvetica-BoldOblique" };
const FONT_NAMES = new Set(Object.values(HELVETICA));
pdfmake.setFonts({ Helvetica: HELVETICA });
pdfmake.setUrlAccessPolicy(() => false);
pdfmake.setLocalAccessPolicy((path) => FONT_NAMES.has(path));

const PERIOD_WORDS: Record<StatementPeriod, string> = { "1M": "1 month", "3M": "3 months", "6M": "6 months", "12M": "12 months" };

/** How a reader checks the document: on page 1 in full, and in the footer of every page. */
export const VERIFY_ROUTE = "/ipfs/{cid}";

const grey = "#555555";
const amount = (units: bigint, decimals: number) => ({ text: formatAmount(units, decimals), alignment: "right" });
const header = (cells: string[], right: number[] = []) => cells.map((text, i) => ({ text, bold: true, fillColor: "#eeeeee", ...(right.includes(i) ? { alignment: "right" } : {}) }));

/**
 * The statement as a PDF: the summary first, then month by month, then every transfer; page
 * numbers and how to verify on every page. The same data gives the same bytes: the creation date
 * is the data's own time (the latest indexed block), rows come in chain order, and nothing else
 * varies. `csvCid` is the CID of the CSV of the same rows, pinned beside it: a document cannot
 * contain its own CID, so each page names the CSV's, and the verify route.
 */
export async function statementPdf(data: StatementData, csvCid: string): Promise<Uint8Array> {
  const { wallet, rows } = data;
  const decimals = data.tokens[0]?.token.decimals ?? 6;
  const sameDecimals = data.tokens.every((t) => t.token.decimals === decimals);
  const sum = (f: (t: StatementData["tokens"][number]) => bigint) => data.tokens.reduce((n, t) => n + f(t), 0n);
  const totalIn = sum((t) => t.totalIn);
  const totalOut = sum((t) => t.totalOut);
  const transfersIn = data.tokens.reduce((n, t) => n + t.transfersIn, 0);
  const transfersOut = data.tokens.reduce((n, t) => n + t.transfersOut, 0);
  const asOf = new Date(data.asOf.timestamp * 1000);
  const symbols = data.tokens.map((t) => t.token.symbol).join(" and ");

  const summary = [
    ["Wallet", wallet],
    ["Period", `${PERIOD_WORDS[data.period]} (${data.period}): ${utcDateTime(data.from)} to ${utcDateTime(data.to)} UTC, both included`],
    ["Data as of", `block ${data.asOf.block}, ${utcDateTime(data.asOf.timestamp)} UTC (the latest indexed block)`],
    ["Transfers", rows.length === 0 ? "0: no transfers in this period" : `${rows.length} (${transfersIn} in, ${transfersOut} out)`],
    ...(sameDecimals
      ? [
          ["Total in", `${formatAmount(totalIn, decimals)} USD`],
          ["Total out", `${formatAmount(totalOut, decimals)} USD`],
          ["Net", `${formatAmount(totalIn - totalOut, decimals)} USD`],
        ]
      : []),
  ].map(([k, v]) => [{ text: k!, bold: true }, { text: v! }]);

  const tokenTable = [
    header(["Token", "Opening balance", "Total in", "Total out", "Net", "Closing balance", "Transfers in", "Transfers out"], [1, 2, 3, 4, 5, 6, 7]),
    ...data.tokens.map((t) => [
      { text: t.token.symbol, bold: true },
      amount(t.opening, t.token.decimals),
      amount(t.totalIn, t.token.decimals),
      amount(t.totalOut, t.token.decimals),
      amount(t.totalIn - t.totalOut, t.token.decimals),
      amount(t.closing, t.token.decimals),
      { text: String(t.transfersIn), alignment: "right" },
      { text: String(t.transfersOut), alignment: "right" },
    ]),
    ...(sameDecimals && data.tokens.length > 1
      ? [
          [
            { text: "All (USD)", bold: true },
            amount(sum((t) => t.opening), decimals),
            amount(totalIn, decimals),
            amount(totalOut, decimals),
            amount(totalIn - totalOut, decimals),
            amount(sum((t) => t.closing), decimals),
            { text: String(transfersIn), alignment: "right" },
            { text: String(transfersOut), alignment: "right" },
          ].map((c) => ({ ...c, bold: true })),
        ]
      : []),
  ];

  const verify = [
    { text: "How to verify this statement", style: "h2" },
    {
      text: [
        "This PDF and a CSV of the same rows are pinned to IPFS. The PDF's CID, the content identifier of these exact bytes (CIDv1, raw leaves, 1 MiB chunks: ",
        { text: "ipfs add --cid-version=1 --raw-leaves --chunker=size-1048576", italics: true },
        " recomputes it), is given in the answer that produced it and by the wallet's statement signal. ",
        { text: "GET /ipfs/<cid>", bold: true },
        " on this service serves the file only after checking its bytes against that CID. A document cannot print its own CID, so every page names the CSV's instead: ",
        { text: `/ipfs/${csvCid}`, bold: true },
        ". Each row gives its transaction hash, to be checked on any Celo explorer.",
      ],
      color: grey,
    },
  ];

  const monthTable = [
    header(["Month", "Token", "Total in", "Total out", "Net", "Transfers in", "Transfers out"], [2, 3, 4, 5, 6]),
    ...data.months.map((m) => [
      m.month,
      m.token.symbol,
      amount(m.totalIn, m.token.decimals),
      amount(m.totalOut, m.token.decimals),
      amount(m.totalIn - m.totalOut, m.token.decimals),
      { text: String(m.transfersIn), alignment: "right" },
      { text: String(m.transfersOut), alignment: "right" },
    ]),
  ];

  const transferTable = [
    header(["Date and time (UTC)", "Direction", "Counterparty", "Token", "Amount", "Transaction"], [4]),
    ...rows.map((r) => [utcDateTime(r.timestamp), r.direction, { text: r.counterparty, noWrap: true }, r.token.symbol, amount(r.value, r.token.decimals), { text: shortHash(r.transactionHash), noWrap: true }]),
  ];

  const none = (what: string) => ({ text: what, italics: true, margin: [0, 2, 0, 8] });
  const definition = {
    pageSize: "A4",
    pageMargins: [36, 40, 36, 58],
    info: {
      title: `Wallet statement ${wallet} ${utcDate(data.from)} to ${utcDate(data.to)}`,
      author: "Celo wallet reputation",
      subject: `${symbols} transfers of ${wallet}, ${data.period}, as of block ${data.asOf.block}`,
      creator: "Celo wallet reputation",
      producer: "Celo wallet reputation (pdfmake)",
      creationDate: asOf,
      modDate: asOf,
    },
    defaultStyle: { font: "Helvetica", fontSize: 8.5 },
    styles: {
      h1: { fontSize: 16, bold: true, margin: [0, 0, 0, 2] },
      h2: { fontSize: 11, bold: true, margin: [0, 12, 0, 4] },
      small: { fontSize: 7.5 },
    },
    footer: (page: number, pages: number) => ({
      margin: [36, 8, 36, 0],
      fontSize: 6.5,
      color: grey,
      columns: [
        {
          width: "*",
          stack: [
            `Statement of ${wallet}, ${utcDateTime(data.from)} to ${utcDateTime(data.to)} UTC, data as of block ${data.asOf.block}.`,
            "Verify: GET /ipfs/<cid> on this service serves this PDF, checked against its CID (given with it, and by the wallet's statement signal).",
            `Its rows as CSV: /ipfs/${csvCid}`,
          ],
        },
        { width: 60, text: `Page ${page} of ${pages}`, alignment: "right", fontSize: 7.5, bold: true, color: "#000000" },
      ],
    }),
    content: [
      { text: "Wallet statement", style: "h1" },
      { text: `${symbols} transfers on Celo, from the service's index of the chain`, color: grey, margin: [0, 0, 0, 10] },
      { text: "Summary", style: "h2" },
      { table: { widths: [70, "*"], body: summary }, layout: "noBorders" },
      { text: "Balances and totals by token", style: "h2" },
      { table: { headerRows: 1, widths: [44, "*", "*", "*", "*", "*", 42, 46], body: tokenTable }, layout: "lightHorizontalLines", style: "small" },
      ...verify,
      { text: "Month by month", style: "h2" },
      rows.length === 0
        ? none("No transfers in this period.")
        : [
            { text: `Calendar months (UTC). The first and last months are partial: the period starts ${utcDateTime(data.from)} and ends ${utcDateTime(data.to)}.`, color: grey, style: "small", margin: [0, 0, 0, 4] },
            { table: { headerRows: 1, widths: [40, 34, "*", "*", "*", 50, 54], body: monthTable }, layout: "lightHorizontalLines", style: "small" },
          ],
      { text: `Every transfer (${rows.length})`, style: "h2" },
      rows.length === 0
        ? none("No transfers in this period: the balances above did not change.")
        : { table: { headerRows: 1, widths: [70, 38, 184, 26, "*", 88], body: transferTable }, layout: "noBorders", fontSize: 7.5 },
    ],
  };
  return new Uint8Array(await pdfmake.createPdf(definition).getBuffer());
}
