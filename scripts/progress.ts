import { createLogger, type Logger } from "../shared/log.ts";
import { etaSeconds, SlidingRate } from "../shared/rate.ts";

/** What is being done: "Seeding" so many days of history, or "Backfill" so many blocks, counting transfers or events. */
export type ProgressTask = { name: string; unit: string; eventUnit: string };
/** How far it is: `done` of `total` units, and `events` handled so far. */
export type ProgressFigures = { done: number; total: number; events: number };
export type ProgressSnapshot = ProgressTask &
  ProgressFigures & {
    fraction: number;
    eventsPerSecond: number | null;
    etaSeconds: number | null;
    elapsedSeconds: number;
    finished: boolean;
  };

// Formatting: pure functions (test/progress.test.ts).

export const formatCount = (n: number) => Math.floor(n).toLocaleString("en-US");

/** A speed to the precision a reader cares about: 4,820 · 37 · 2.5. */
export const formatRate = (n: number) => (n >= 100 ? formatCount(n) : n >= 10 ? String(Math.round(n)) : n.toFixed(1));

/** Rounded down, so that 100% means done. */
export const formatPercent = (fraction: number) =>
  `${(Math.floor(Math.min(1, Math.max(0, fraction)) * 1000) / 10).toFixed(1)}%`;

/** 42s · 3m 05s · 1h 12m · 2d 03h: the two largest units are all a reader takes in. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const pad = (n: number) => String(n).padStart(2, "0");
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86_400)}d ${pad(Math.floor((s % 86_400) / 3600))}h`;
}

export function renderBar(fraction: number, width: number): string {
  const filled = Math.round(Math.min(1, Math.max(0, fraction)) * width);
  return `[${"█".repeat(filled)}${"░".repeat(width - filled)}]`;
}

/** The figures a line shows: the progress, the speeds measured so far and the time left at that speed. */
export function snapshot(
  task: ProgressTask,
  figures: ProgressFigures,
  speed: { unitsPerSecond: number | null; eventsPerSecond: number | null; elapsedSeconds: number; finished?: boolean },
): ProgressSnapshot {
  const finished = speed.finished ?? false;
  return {
    ...task,
    ...figures,
    fraction: finished ? 1 : figures.total > 0 ? Math.min(1, figures.done / figures.total) : 0,
    eventsPerSecond: finished
      ? speed.elapsedSeconds > 0
        ? figures.events / speed.elapsedSeconds
        : null
      : speed.eventsPerSecond,
    etaSeconds: finished ? 0 : etaSeconds(figures.total - figures.done, speed.unitsPerSecond),
    elapsedSeconds: speed.elapsedSeconds,
    finished,
  };
}

/** A terminal's line: the bar and the figures, the least telling dropped first when the width is short. */
export function barLine(s: ProgressSnapshot, columns: number): string {
  const figures = [
    { text: formatPercent(s.fraction).padStart(6), keep: 4 },
    { text: `${formatCount(s.done)}/${formatCount(s.total)} ${s.unit}`, keep: 1 },
    { text: `${formatCount(s.events)} ${s.eventUnit}`, keep: 0 },
    { text: s.eventsPerSecond === null ? "" : `${formatRate(s.eventsPerSecond)}/s`, keep: 2 },
    {
      text: s.finished
        ? `in ${formatDuration(s.elapsedSeconds)}`
        : s.etaSeconds === null
          ? ""
          : `${formatDuration(s.etaSeconds)} left`,
      keep: 3,
    },
  ].filter((f) => f.text);
  // One column short of the width: a line that fills it wraps on some terminals, and \r then redraws the wrong line.
  const width = columns - 1;
  let text = "";
  for (let drop = 0; drop < 4; drop++) {
    text = figures
      .filter((f) => f.keep >= drop)
      .map((f) => f.text)
      .join("  ");
    const barWidth = Math.min(30, width - s.name.length - text.length - 4); // two spaces, two brackets
    if (barWidth >= 10) return `${s.name} ${renderBar(s.fraction, barWidth)} ${text}`;
  }
  return `${s.name} ${text}`.slice(0, Math.max(0, width));
}

/** A line for a log: the same figures as a sentence. */
export function plainLine(s: ProgressSnapshot): string {
  const units = `${formatCount(s.done)}/${formatCount(s.total)} ${s.unit}`;
  const events = `${formatCount(s.events)} ${s.eventUnit}`;
  const rate = s.eventsPerSecond === null ? "" : ` (${formatRate(s.eventsPerSecond)}/s)`;
  if (s.finished) return `${s.name}: done, ${units}, ${events} in ${formatDuration(s.elapsedSeconds)}${rate}`;
  const eta = s.etaSeconds === null ? "" : `, about ${formatDuration(s.etaSeconds)} left`;
  return `${s.name}: ${formatPercent(s.fraction)} (${units}), ${events}${rate}${eta}`;
}

/** The JSON log's fields: the same figures, for a log pipeline to query. */
export function logFields(s: ProgressSnapshot) {
  const round = (n: number | null) => (n === null ? null : Math.round(n * 10) / 10);
  return {
    progress: s.name.toLowerCase(),
    unit: s.unit,
    done: round(s.done),
    total: round(s.total),
    percent: Number(formatPercent(s.fraction).slice(0, -1)),
    [s.eventUnit]: s.events,
    [`${s.eventUnit}PerSecond`]: round(s.eventsPerSecond),
    etaSeconds: s.etaSeconds,
    elapsedSeconds: round(s.elapsedSeconds),
    finished: s.finished,
  };
}

/** Redraws of a terminal's bar at most this often; lines to a log (not a terminal) this often. */
const REDRAW_MS = 100;
export const LINE_EVERY_MS = 10_000;

export type Progress = {
  update(figures: ProgressFigures): void;
  /** The last line (done, total time and mean speed); `figures` default to the last update. */
  finish(figures?: ProgressFigures): void;
  /**
   * For output of a child process while a bar is drawn (its stdout piped here): the bar is cleared
   * before it and drawn again after it. After finish(), output passes straight through.
   */
  write(chunk: Buffer | string): void;
};

export type ProgressOptions = {
  out?: Pick<NodeJS.WriteStream, "write" | "isTTY" | "columns">;
  /** Speeds are measured over this window. */
  windowMs?: number;
  now?: () => number;
};

/**
 * Progress a person can watch. On a terminal, a bar redrawn in place; otherwise (CI, systemd, a log
 * file) one JSON line every 10 s, shaped like the API's log (`msg` is the sentence a person reads,
 * the figures are fields), plus the first update's and the last one.
 */
export function createProgress(task: ProgressTask, options: ProgressOptions = {}): Progress {
  const out = options.out ?? process.stdout;
  const now = options.now ?? Date.now;
  const tty = out.isTTY === true;
  // Off a terminal, lines go to a JSON logger on `out`, at LOG_LEVEL like the API's log.
  const logger: Logger | undefined = tty ? undefined : createLogger({ destination: out });
  const windowMs = options.windowMs ?? 30_000;
  const unitSpeed = new SlidingRate(windowMs);
  const eventSpeed = new SlidingRate(windowMs);
  const started = now();
  let last: ProgressFigures | undefined;
  let shownAt: number | undefined;
  let drawn = false; // a bar is on the terminal's last line
  let lineOpen = false; // a child's output ended mid-line: no bar until its line ends
  let finished = false;

  const current = (end = false) =>
    snapshot(task, last!, {
      unitsPerSecond: unitSpeed.perSecond(),
      eventsPerSecond: eventSpeed.perSecond(),
      elapsedSeconds: (now() - started) / 1000,
      finished: end,
    });
  const draw = (end = false) => {
    out.write(`\r${barLine(current(end), out.columns || 80)}\x1b[K${end ? "\n" : ""}`);
    drawn = !end;
  };
  const clear = () => {
    if (drawn) out.write("\r\x1b[K");
    drawn = false;
  };
  const show = (end = false) => {
    shownAt = now();
    if (tty) {
      if (lineOpen && !end) return;
      if (lineOpen) out.write("\n");
      lineOpen = false;
      return draw(end);
    }
    const s = current(end);
    logger!.info(logFields(s), plainLine(s));
  };
  // A bar left open when the process ends (Ctrl-C, a failed start) would hold the shell's prompt.
  if (tty) process.once("exit", () => drawn && out.write("\n"));

  return {
    update(figures) {
      if (finished) return;
      const at = now();
      last = figures;
      unitSpeed.add(figures.done, at);
      eventSpeed.add(figures.events, at);
      if (shownAt === undefined || at - shownAt >= (tty ? REDRAW_MS : LINE_EVERY_MS)) show();
    },
    finish(figures) {
      if (finished) return;
      if (figures) last = figures;
      finished = true;
      if (last) show(true);
    },
    write(chunk) {
      const text = chunk.toString();
      if (!tty || finished) return void out.write(text);
      clear();
      out.write(text);
      lineOpen = !text.endsWith("\n");
      if (!lineOpen && last) draw();
    },
  };
}
