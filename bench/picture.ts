/**
 * A picture of a comparison: for each run (in the order they ran) one panel with the attacher's
 * RSS and the number of VolumeAttachments attached over time, the phases shaded. Every panel
 * shares the time axis (seconds since the attacher was started) and the RSS axis, so panels
 * compare at a glance. Plain SVG 1.1: no script, no external style, readable in any browser.
 *
 * @module
 */

import type { PhaseName, RunResult } from "./run.ts";

/** One panel's data; times are epoch ms. */
export interface Panel {
  title: string;
  /** Which series colour: the attacher's index (0: A, 1: B). */
  attacherIndex: number;
  /** Time zero of the panel (the attacher's start). */
  originAt: number;
  phases: { name: string; from: number; to: number }[];
  rss: { at: number[]; bytes: number[] };
  /** Attached VolumeAttachments at `startAt + i * stepMs`. */
  attached: { startAt: number; stepMs: number; counts: number[] };
}

const WIDTH = 960;
const PANEL_HEIGHT = 170;
const GAP = 46;
const LEFT = 64;
const RIGHT = 72;
const TOP = 78;
const PLOT_WIDTH = WIDTH - LEFT - RIGHT;
const MIB = 1024 * 1024;
/** Series colours by attacher (colour-blind safe: blue and orange). */
const COLOURS = ["#1f5fa8", "#d9730d"];
const ATTACHED_COLOUR = "#2b2b2b";
const PHASE_FILLS: Record<string, string> = {
  startup: "#eeeeee",
  attach: "#e3f0e3",
  rest: "#f4f4e0",
  detach: "#f3e4e4",
  "lease wait": "#eeeeee",
  "caches syncing": "#f4f4e0",
  takeover: "#e3eaf3",
};

/** Round numbers for an axis from 0 to at least `max`: about `count` steps of 1, 2 or 5 × 10^k. */
export function niceTicks(max: number, count = 5): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? 10 * power;
  const ticks: number[] = [];
  for (let v = 0; v < max + step; v += step) {
    ticks.push(Number(v.toPrecision(12)));
    if (v >= max) break;
  }
  return ticks;
}

/** Escapes text for SVG. */
function esc(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function fmt(v: number): string {
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

function tickLabel(v: number): string {
  if (v >= 1000 && v % 1000 === 0) return `${v / 1000}k`;
  return String(v);
}

/** The panels of one scenario: each run of each attacher, in the order they ran. */
export function panelsOf(labels: string[], runsByAttacher: RunResult[][]): Panel[] {
  const panels: Panel[] = [];
  const most = Math.max(0, ...runsByAttacher.map((r) => r.length));
  for (let run = 0; run < most; run++) {
    for (const [i, runs] of runsByAttacher.entries()) {
      const r = runs[run];
      if (r === undefined) continue;
      const origin = r.phaseTimes.startup?.[0] ?? r.rssSeries.at[0] ?? NaN;
      const phases = (["startup", "attach", "rest", "detach"] as PhaseName[])
        .flatMap((name) => {
          const t = r.phaseTimes[name];
          return t === undefined ? [] : [{ name, from: t[0], to: t[1] }];
        });
      const f = (v: number, d = 0) => (Number.isFinite(v) ? v.toFixed(d) : "–");
      const title = r.ok
        ? `${labels[i]}, run ${r.run}: peak ${f(r.peakRssBytes / MIB)} MiB, at rest ${
          f(r.restRssBytes / MIB)
        } MiB; ${f(r.attachesPerSecond)} attaches/s, ${f(r.detachesPerSecond)} detaches/s`
        : `${labels[i]}, run ${r.run}: FAILED (${(r.error ?? "").split("\n")[0]})`;
      panels.push({
        title,
        attacherIndex: i,
        originAt: origin,
        phases,
        rss: r.rssSeries,
        attached: r.timeline?.attachedSeries ?? { startAt: NaN, stepMs: 0, counts: [] },
      });
    }
  }
  return panels;
}

/**
 * The SVG document: `heading` on top, then one panel per entry of `panels` sharing the time and
 * RSS axes; `count` is the attached axis' top (N).
 */
export function renderPicture(
  heading: string,
  count: number,
  panels: Panel[],
  labels: string[],
  xLabel = "seconds since the attacher started",
): string {
  let seconds = 1;
  let rssMax = 1;
  for (const p of panels) {
    const ends = [
      ...p.phases.map((ph) => ph.to),
      p.rss.at.at(-1) ?? NaN,
      p.attached.startAt + p.attached.stepMs * Math.max(0, p.attached.counts.length - 1),
    ].filter(Number.isFinite);
    seconds = Math.max(seconds, ...ends.map((t) => (t - p.originAt) / 1000));
    rssMax = Math.max(rssMax, ...p.rss.bytes.map((b) => b / MIB));
  }
  const xTicks = niceTicks(seconds, 10);
  const xMax = xTicks.at(-1)!;
  const rssTicks = niceTicks(rssMax, 4);
  const rssTop = rssTicks.at(-1)!;
  const nTicks = niceTicks(Math.max(1, count), 4);
  const nTop = nTicks.at(-1)!;
  const height = TOP + panels.length * (PANEL_HEIGHT + GAP) + 10;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="DejaVu Sans, Arial, sans-serif" font-size="11">`,
    `<rect x="0" y="0" width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text x="${LEFT}" y="20" font-size="14" font-weight="bold">${esc(heading)}</text>`,
  );
  // Legend.
  let lx = LEFT;
  const legend = (colour: string, dash: string, text: string) => {
    out.push(
      `<line x1="${fmt(lx)}" y1="38" x2="${
        fmt(lx + 24)
      }" y2="38" stroke="${colour}" stroke-width="2"${dash}/>`,
      `<text x="${fmt(lx + 30)}" y="42">${esc(text)}</text>`,
    );
    lx += 40 + text.length * 6.2;
  };
  for (const [i, label] of labels.entries()) {
    legend(
      COLOURS[i % COLOURS.length]!,
      "",
      `RSS of ${label}${i === 0 ? " (left axis, MiB)" : ""}`,
    );
  }
  const hasAttached = panels.some((p) => p.attached.counts.length > 0);
  if (hasAttached) {
    legend(ATTACHED_COLOUR, ` stroke-dasharray="5,3"`, "VolumeAttachments attached (right axis)");
  }
  lx = LEFT;
  out.push(`<text x="${lx}" y="62">phases:</text>`);
  lx += 50;
  const present = new Set(panels.flatMap((p) => p.phases.map((ph) => ph.name)));
  for (const [name, fill] of Object.entries(PHASE_FILLS)) {
    if (!present.has(name)) continue;
    out.push(
      `<rect x="${fmt(lx)}" y="51" width="14" height="12" fill="${fill}" stroke="#bbbbbb"/>`,
      `<text x="${fmt(lx + 18)}" y="62">${name}</text>`,
    );
    lx += 30 + name.length * 6.2;
  }

  for (const [k, p] of panels.entries()) {
    const top = TOP + k * (PANEL_HEIGHT + GAP) + 18;
    const bottom = top + PANEL_HEIGHT;
    const x = (t: number) => LEFT + ((t - p.originAt) / 1000 / xMax) * PLOT_WIDTH;
    const yRss = (mib: number) => bottom - (mib / rssTop) * PANEL_HEIGHT;
    const yN = (n: number) => bottom - (n / nTop) * PANEL_HEIGHT;
    out.push(`<text x="${LEFT}" y="${top - 6}" font-size="12">${esc(p.title)}</text>`);
    for (const ph of p.phases) {
      const x0 = Math.max(LEFT, x(ph.from));
      const x1 = Math.min(LEFT + PLOT_WIDTH, x(ph.to));
      if (!(x1 > x0)) continue;
      out.push(
        `<rect x="${fmt(x0)}" y="${top}" width="${fmt(x1 - x0)}" height="${PANEL_HEIGHT}" fill="${
          PHASE_FILLS[ph.name] ?? "#f0f0f0"
        }"/>`,
      );
      if (x1 - x0 > 30) {
        out.push(
          `<text x="${fmt(x0 + 3)}" y="${top + 12}" fill="#666666">${esc(ph.name)}</text>`,
        );
      }
    }
    out.push(
      `<rect x="${LEFT}" y="${top}" width="${PLOT_WIDTH}" height="${PANEL_HEIGHT}" fill="none" stroke="#999999"/>`,
    );
    for (const v of rssTicks) {
      const y = fmt(yRss(v));
      out.push(
        `<line x1="${LEFT}" y1="${y}" x2="${
          LEFT + PLOT_WIDTH
        }" y2="${y}" stroke="#dddddd" stroke-width="0.5"/>`,
        `<text x="${LEFT - 6}" y="${fmt(yRss(v) + 4)}" text-anchor="end">${v}</text>`,
      );
    }
    for (const v of hasAttached ? nTicks : []) {
      out.push(
        `<text x="${LEFT + PLOT_WIDTH + 6}" y="${fmt(yN(v) + 4)}">${tickLabel(v)}</text>`,
      );
    }
    for (const v of xTicks) {
      const xv = fmt(LEFT + (v / xMax) * PLOT_WIDTH);
      out.push(
        `<line x1="${xv}" y1="${bottom}" x2="${xv}" y2="${bottom + 4}" stroke="#999999"/>`,
        `<text x="${xv}" y="${bottom + 15}" text-anchor="middle">${v}</text>`,
      );
    }
    out.push(
      `<text x="${LEFT + PLOT_WIDTH / 2}" y="${bottom + 28}" text-anchor="middle" fill="#555555">${
        esc(xLabel)
      }</text>`,
      `<text transform="translate(${LEFT - 44},${
        top + PANEL_HEIGHT / 2
      }) rotate(-90)" text-anchor="middle" fill="#555555">RSS, MiB</text>`,
    );
    if (hasAttached) {
      out.push(
        `<text transform="translate(${WIDTH - 14},${
          top + PANEL_HEIGHT / 2
        }) rotate(90)" text-anchor="middle" fill="#555555">VAs attached</text>`,
      );
    }
    const a = p.attached;
    if (a.counts.length > 0) {
      const points = a.counts.map((n, i) => `${fmt(x(a.startAt + i * a.stepMs))},${fmt(yN(n))}`);
      // From zero at the attacher's start to the first point.
      points.unshift(`${fmt(x(p.originAt))},${fmt(yN(0))}`);
      out.push(
        `<polyline fill="none" stroke="${ATTACHED_COLOUR}" stroke-width="1.5" stroke-dasharray="5,3" points="${
          points.join(" ")
        }"/>`,
      );
    }
    if (p.rss.at.length > 0) {
      const points = p.rss.at.map((t, i) => `${fmt(x(t))},${fmt(yRss(p.rss.bytes[i]! / MIB))}`);
      out.push(
        `<polyline fill="none" stroke="${
          COLOURS[p.attacherIndex % COLOURS.length]
        }" stroke-width="1.8" points="${points.join(" ")}"/>`,
      );
    }
  }
  out.push("</svg>");
  return out.join("\n") + "\n";
}
