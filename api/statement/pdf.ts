import { zeroAddress } from "viem";
import type { StatementData, StatementPeriod } from "./data.ts";
import { formatAmount, shortHash, utcDate, utcDateTime } from "./format.ts";

// pdfmake 0.3 in Node (PITFALLS.md): the 14 standard PDF fonts by name (nothing embedded, WinAnsi
// text only), no URL ever fetched, no local file read except those font names.
const HELVETICA = {
  normal: "Helvetica",
  bold: "Helvetica-Bold",
  italics: "Helvetica-Oblique",
  bolditalics: "Helvetica-BoldOblique",
};
const FONT_NAMES = new Set(Object.values(HELVETICA));

let loading: Promise<typeof import("pdfmake").default> | undefined;
/** pdfmake and pdfkit, loaded with the first statement (or the warm-up): a process that makes none never pays for them. */
const loadPdfmake = () =>
  (loading ??= import("pdfmake").then(({ default: pdfmake }) => {
    pdfmake.setFonts({ Helvetica: HELVETICA });
    pdfmake.setUrlAccessPolicy(() => false);
    pdfmake.setLocalAccessPolicy((path) => FONT_NAMES.has(path));
    return pdfmake;
  }));

const PERIOD_WORDS: Record<StatementPeriod, string> = {
  "1M": "1 month",
  "3M": "3 months",
  "6M": "6 months",
  "12M": "12 months",
};

const grey = "#555555";
const amount = (units: bigint, decimals: number) => ({ text: formatAmount(units, decimals), alignment: "right" });
const header = (cells: string[], right: number[] = []) =>
  cells.map((text, i) => ({
    text,
    bold: true,
    fillColor: "#eeeeee",
    ...(right.includes(i) ? { alignment: "right" } : {}),
  }));

/*
 * The listing of every transfer is most of the work for a busy wallet (5,000 rows, ~70 pages):
 * pdfmake's cost goes by table cell and, above all, by text run (each is measured, laid out and
 * written on its own). So the listing is a table of a few rows, each holding ROWS_PER_CELL transfers
 * (a cell is a column of lines, every line the same height, so the columns stay level; a row is
 * never split over two pages), and a line has four runs, not six or seven: the date, time and
 * direction are one run, and the counterparty and token another. In each, the second part is set
 * at its column by spaces and a character spacing (at most 0.05 pt) that takes up the rest, from
 * Helvetica's own widths (below): exactly where it would stand in a column of its own.
 */
const LISTING_SIZE = 7.5;
const LISTING_LINE = 1.4;
const ROWS_PER_CELL = 5;
const COLUMN_GAP = 8; // the 'noBorders' layout's 4 + 4 points of cell padding
const DATE_WIDTH = 70;
const DIRECTION_WIDTH = 38;
const COUNTERPARTY_WIDTH = 184;
const TOKEN_WIDTH = 26;

// Helvetica's advance widths (1/1000 em) and kerning pairs (pdfkit's Helvetica.afm) for what the
// merged runs hold: UTC dates and times, "in"/"out", and lowercase hex addresses (as indexed;
// any other character counts as wide as a digit).
const WIDTHS: Record<string, number> = {
  "-": 333,
  ":": 278,
  " ": 278,
  a: 556,
  b: 556,
  c: 500,
  d: 556,
  e: 556,
  f: 278,
  i: 222,
  n: 556,
  o: 556,
  t: 278,
  u: 556,
  x: 500,
};
const KERNING: Record<string, number> = { bb: -10, ex: -30, fa: -30, fe: -30, xe: -30 };
function widthUnits(text: string): number {
  let units = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    units += (c >= "0" && c <= "9" ? 556 : WIDTHS[c]) ?? 556;
    if (i > 0) units += KERNING[text[i - 1]! + c] ?? 0;
  }
  return units;
}
const SPACE = (278 * LISTING_SIZE) / 1000;

/**
 * `first`, then `second` starting exactly `at` points from the run's start: spaces, and a character
 * spacing over everything before `second` for what is left (less than a space). One run, kept
 * whole (noWrap) and ending its line (lineEnd); the trailing space keeps pdfmake from gluing it to
 * the next line's run as one word.
 */
function twoColumnRun(first: string, second: string, at: number) {
  const room = at - (widthUnits(first) * LISTING_SIZE) / 1000;
  const spaces = Math.max(1, Math.floor(room / SPACE));
  const before = first.length + spaces;
  return {
    text: `${first}${" ".repeat(spaces)}${second} `,
    characterSpacing: Math.max(0, room - spaces * SPACE) / before,
    noWrap: true,
    lineEnd: true,
  };
}

// 'noBorders', but with no padding above or below the rows of transfers: their lines follow each
// other at the same spacing across rows.
const LISTING_LAYOUT = {
  hLineWidth: () => 0,
  vLineWidth: () => 0,
  paddingLeft: (i: number) => (i === 0 ? 0 : COLUMN_GAP / 2),
  paddingRight: (i: number, node: { table: { widths: unknown[] } }) =>
    i < node.table.widths.length - 1 ? COLUMN_GAP / 2 : 0,
  paddingTop: (i: number) => (i === 0 ? 2 : 0),
  paddingBottom: (i: number) => (i === 0 ? 2 : 0),
};

const chunks = <T>(xs: readonly T[], n: number): T[][] =>
  Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, (i + 1) * n));
const lines = (xs: string[]) => xs.join("\n");
function transferChunk(rows: StatementData["rows"]) {
  return [
    {
      text: rows.map((r) => twoColumnRun(utcDateTime(r.timestamp), r.direction, DATE_WIDTH + COLUMN_GAP)),
      lineHeight: LISTING_LINE,
    },
    {
      text: rows.map((r) => twoColumnRun(r.counterparty, r.token.symbol, COUNTERPARTY_WIDTH + COLUMN_GAP)),
      lineHeight: LISTING_LINE,
    },
    {
      text: lines(rows.map((r) => formatAmount(r.value, r.token.decimals))),
      alignment: "right",
      lineHeight: LISTING_LINE,
    },
    { text: lines(rows.map((r) => shortHash(r.transactionHash))), lineHeight: LISTING_LINE },
  ];
}
const twoColumnHeader = (first: string, firstWidth: number, second: string) => ({
  columns: [
    { width: firstWidth, text: first },
    { width: "*", text: second },
  ],
  columnGap: COLUMN_GAP,
  bold: true,
  fillColor: "#eeeeee",
});

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
    [
      "Period",
      `${PERIOD_WORDS[data.period]} (${data.period}): ${utcDateTime(data.from)} to ${utcDateTime(data.to)} UTC, both included`,
    ],
    ["Data as of", `block ${data.asOf.block}, ${utcDateTime(data.asOf.timestamp)} UTC (the latest indexed block)`],
    [
      "Transfers",
      rows.length === 0 ? "0: no transfers in this period" : `${rows.length} (${transfersIn} in, ${transfersOut} out)`,
    ],
    ...(sameDecimals
      ? [
          ["Total in", `${formatAmount(totalIn, decimals)} USD`],
          ["Total out", `${formatAmount(totalOut, decimals)} USD`],
          ["Net", `${formatAmount(totalIn - totalOut, decimals)} USD`],
        ]
      : []),
  ].map(([k, v]) => [{ text: k!, bold: true }, { text: v! }]);

  const tokenTable = [
    header(
      ["Token", "Opening balance", "Total in", "Total out", "Net", "Closing balance", "Transfers in", "Transfers out"],
      [1, 2, 3, 4, 5, 6, 7],
    ),
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
            amount(
              sum((t) => t.opening),
              decimals,
            ),
            amount(totalIn, decimals),
            amount(totalOut, decimals),
            amount(totalIn - totalOut, decimals),
            amount(
              sum((t) => t.closing),
              decimals,
            ),
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
    [
      // A header cell over each two columns that share a run (see transferChunk).
      twoColumnHeader("Date and time (UTC)", DATE_WIDTH, "Direction"),
      twoColumnHeader("Counterparty", COUNTERPARTY_WIDTH, "Token"),
      ...header(["Amount", "Transaction"], [0]),
    ],
    // The first row of the table alone, so that the header never waits for a whole row of five.
    ...[rows.slice(0, 1), ...chunks(rows.slice(1), ROWS_PER_CELL)].filter((c) => c.length > 0).map(transferChunk),
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
        {
          width: 60,
          text: `Page ${page} of ${pages}`,
          alignment: "right",
          fontSize: 7.5,
          bold: true,
          color: "#000000",
        },
      ],
    }),
    content: [
      { text: "Wallet statement", style: "h1" },
      {
        text: `${symbols} transfers on Celo, from the service's index of the chain`,
        color: grey,
        margin: [0, 0, 0, 10],
      },
      { text: "Summary", style: "h2" },
      { table: { widths: [70, "*"], body: summary }, layout: "noBorders" },
      { text: "Balances and totals by token", style: "h2" },
      {
        table: { headerRows: 1, widths: [44, "*", "*", "*", "*", "*", 42, 46], body: tokenTable },
        layout: "lightHorizontalLines",
        style: "small",
      },
      ...verify,
      { text: "Month by month", style: "h2" },
      rows.length === 0
        ? none("No transfers in this period.")
        : [
            {
              text: `Calendar months (UTC). The first and last months are partial: the period starts ${utcDateTime(data.from)} and ends ${utcDateTime(data.to)}.`,
              color: grey,
              style: "small",
              margin: [0, 0, 0, 4],
            },
            {
              table: { headerRows: 1, widths: [40, 34, "*", "*", "*", 50, 54], body: monthTable },
              layout: "lightHorizontalLines",
              style: "small",
            },
          ],
      { text: `Every transfer (${rows.length})`, style: "h2" },
      rows.length === 0
        ? none("No transfers in this period: the balances above did not change.")
        : {
            table: {
              headerRows: 1,
              keepWithHeaderRows: 1,
              dontBreakRows: true,
              widths: [
                DATE_WIDTH + COLUMN_GAP + DIRECTION_WIDTH,
                COUNTERPARTY_WIDTH + COLUMN_GAP + TOKEN_WIDTH,
                "*",
                88,
              ],
              body: transferTable,
            },
            layout: LISTING_LAYOUT,
            fontSize: LISTING_SIZE,
          },
    ],
  };
  const pdfmake = await loadPdfmake();
  return new Uint8Array(await pdfmake.createPdf(definition).getBuffer());
}

let warming: Promise<void> | undefined;

/**
 * Renders a made-up statement of 1,000 transfers, once per process: the first statement a
 * process makes otherwise pays for reading the font metrics and for pdfmake's and pdfkit's code
 * running cold (about half as long again as the next ones). Called when the app sets up the
 * statement route; never fails.
 */
export function warmStatementPdf(): Promise<void> {
  warming ??= (async () => {
    const token = (symbol: "USDT" | "USDC") => ({
      symbol,
      address: zeroAddress,
      decimals: 6 as const,
      name: symbol,
      version: "1",
    });
    const tokens = [token("USDT"), token("USDC")];
    const to = 1_767_225_600;
    const rows = Array.from({ length: 1_000 }, (_, i) => ({
      timestamp: to - i * 3600,
      blockNumber: BigInt(i),
      logIndex: 0,
      transactionHash: `0x${(i + 1).toString(16).padStart(64, "0")}`,
      direction: i % 2 ? ("out" as const) : ("in" as const),
      counterparty: zeroAddress,
      token: tokens[i % 2]!,
      value: BigInt(i * 1_234_567),
    }));
    const totals = tokens.map((t) => ({
      token: t,
      opening: 0n,
      totalIn: 1n,
      totalOut: 0n,
      closing: 1n,
      transfersIn: 1,
      transfersOut: 0,
    }));
    const months = tokens.map((t) => ({
      month: "2026-01",
      token: t,
      totalIn: 1n,
      totalOut: 0n,
      transfersIn: 1,
      transfersOut: 0,
    }));
    await statementPdf(
      {
        wallet: zeroAddress,
        period: "1M",
        from: to - 2_592_000,
        to,
        asOf: { block: 1n, timestamp: to },
        rows: rows.reverse(),
        tokens: totals,
        months,
      },
      "",
    );
  })().catch(() => {});
  return warming;
}
