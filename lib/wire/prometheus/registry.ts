/**
 * A small Prometheus registry: counters, gauges and histograms with labels, and their text
 * exposition (format 0.0.4, prometheus/docs `content/docs/instrumenting/exposition_formats.md`).
 *
 * The text is laid out the way client_golang writes it (`prometheus/registry.go` `Gather`,
 * `expfmt/text_create.go` `MetricFamilyToText`), so a scrape of the attacher reads like one of the
 * Go sidecar:
 *
 * - families sorted by name, each as `# HELP`, `# TYPE` and its samples, without blank lines; a
 *   family with no series yet is left out (a labelled vector nobody used);
 * - the labels of a sample sorted by name, a histogram's `le` last; the series of a family sorted
 *   by their label values;
 * - help text escapes `\` and newline, label values escape `\`, `"` and newline;
 * - a histogram has one cumulative `_bucket` per upper bound, `le="+Inf"` (the count), `_sum` and
 *   `_count`;
 * - values `NaN`, `+Inf` and `-Inf`.
 *
 * Finite numbers, values and `le` bounds alike, are written as JavaScript's `String(n)` writes them
 * (`0.000001`, `1e-7`, `1712345678.5`), which every Prometheus parser reads as the same float as
 * Go's `1e-06`, `1e-07` and `1.7123456785e+09`.
 *
 * The subset: counters, gauges and histograms with labels; no summaries, no OpenMetrics or
 * protobuf exposition, no exemplars, no content negotiation. Misuse (a bad name, a wrong label
 * set, bad buckets) throws at once. The text is checked against client_golang's layout in
 * `registry_test.ts` and scraped over HTTP from the running attacher in
 * `tests/processes/main_csi_test.ts`; no Prometheus server reads it in the suite.
 *
 * @module
 */

/** The content type of {@link Registry.metricsText}. */
export const TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Label values by label name. */
export type Labels = Readonly<Record<string, string>>;

/** What every metric of a {@link Registry} has. */
export interface MetricOptions {
  /** The metric name, `[a-zA-Z_:][a-zA-Z0-9_:]*`. */
  name: string;
  /** The help text. */
  help: string;
  /** The label names, `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`; none by default. */
  labelNames?: readonly string[];
  /** The registry to register the metric in. */
  registry: Registry;
}

/** Options of a {@link Gauge}. */
export interface GaugeOptions extends MetricOptions {
  /** Called at each scrape before the gauge is written, e.g. to set it from a cache. */
  collect?: (gauge: Gauge) => void;
}

/** Options of a {@link Histogram}. */
export interface HistogramOptions extends MetricOptions {
  /** The upper bounds of the buckets, finite and strictly increasing; `+Inf` is implicit. */
  buckets: readonly number[];
}

/** A metric a {@link Registry} can write. */
interface Collector {
  readonly name: string;
  /** Appends the family's lines, or nothing when it has no series. */
  write(out: string[]): void;
}

/** The metrics of one process or test, written together by {@link metricsText}. */
export class Registry {
  #metrics = new Map<string, Collector>();

  /** Content type of {@link metricsText}. */
  readonly contentType: string = TEXT_CONTENT_TYPE;

  /**
   * Adds a metric; the metric constructors call it.
   *
   * @throws {Error} when a metric of that name is registered already.
   */
  register(metric: Collector): void {
    if (this.#metrics.has(metric.name)) {
      throw new Error(`A metric named ${metric.name} is registered already`);
    }
    this.#metrics.set(metric.name, metric);
  }

  /**
   * Removes the metric named `name` (client_golang's `Unregister`), so that one of that name
   * with other labels can take its place.
   *
   * @returns whether a metric of that name was registered.
   */
  unregister(name: string): boolean {
    return this.#metrics.delete(name);
  }

  /** The text exposition of every metric: families sorted by name, one line each sample. */
  metricsText(): string {
    const names = [...this.#metrics.keys()].sort();
    const out: string[] = [];
    for (const name of names) this.#metrics.get(name)!.write(out);
    return out.length === 0 ? "" : out.join("\n") + "\n";
  }
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** One labelled series: its label values (in sorted label-name order) and rendered labels. */
interface Series<V> {
  values: string[];
  /** `a="1",b="2"`, escaped; "" without labels. */
  labelText: string;
  value: V;
}

/** The series of one metric by label values, and the text around them. */
abstract class Vector<V> implements Collector {
  readonly name: string;
  readonly #help: string;
  readonly #type: string;
  /** The label names, sorted: the order of {@link Series.values} and of the written labels. */
  readonly #labelNames: readonly string[];
  /**
   * The series by label values, one map level per label name (in sorted order), the last level
   * holding the series: a lookup builds no key string (it ran once per request and CSI call).
   */
  readonly #index = new Map<string, unknown>();
  /** Every series, in no particular order. */
  readonly #all: Series<V>[] = [];

  constructor(opts: MetricOptions, type: string) {
    if (!METRIC_NAME.test(opts.name)) throw new Error(`Invalid metric name ${opts.name}`);
    const labelNames = [...(opts.labelNames ?? [])].sort();
    for (const [i, label] of labelNames.entries()) {
      if (!LABEL_NAME.test(label) || label.startsWith("__") || label === "le") {
        throw new Error(`Invalid label name ${label} of metric ${opts.name}`);
      }
      if (labelNames[i + 1] === label) {
        throw new Error(`Duplicate label name ${label} of metric ${opts.name}`);
      }
    }
    this.name = opts.name;
    this.#help = opts.help;
    this.#type = type;
    this.#labelNames = labelNames;
    opts.registry.register(this);
  }

  /** A new value of a series (0, or empty buckets). */
  protected abstract initial(): V;

  /** Appends the sample lines of one series. */
  protected abstract writeSeries(out: string[], series: Series<V>): void;

  /**
   * The series of `labels`, created (at its initial value) when new.
   *
   * @throws {Error} when `labels` does not name exactly the metric's labels.
   */
  protected series(labels: Labels): Series<V> {
    const names = this.#labelNames;
    let given = 0;
    for (const _ in labels) given++;
    if (given !== names.length) throw this.#labelError(labels);
    for (const name of names) {
      if (typeof labels[name] !== "string") throw this.#labelError(labels);
    }
    const last = names.length - 1;
    let level = this.#index;
    for (let i = 0; i < last; i++) {
      const value = labels[names[i]!]!;
      let next = level.get(value) as Map<string, unknown> | undefined;
      if (next === undefined) level.set(value, next = new Map());
      level = next;
    }
    const leaf = last < 0 ? "" : labels[names[last]!]!;
    let series = level.get(leaf) as Series<V> | undefined;
    if (series === undefined) {
      const values = names.map((n) => labels[n]!);
      const labelText = names.map((n, i) => `${n}="${escapeLabelValue(values[i]!)}"`).join(",");
      series = { values, labelText, value: this.initial() };
      level.set(leaf, series);
      this.#all.push(series);
    }
    return series;
  }

  /** Every series with its labels by name, in no particular order. */
  protected *entries(): Iterable<[Labels, V]> {
    const names = this.#labelNames;
    for (const series of this.#all) {
      const labels: Record<string, string> = {};
      for (const [i, name] of names.entries()) labels[name] = series.values[i]!;
      yield [labels, series.value];
    }
  }

  #labelError(labels: Labels): Error {
    return new Error(
      `Metric ${this.name} has labels [${this.#labelNames.join(", ")}], not [${
        Object.keys(labels).sort().join(", ")
      }]`,
    );
  }

  write(out: string[]): void {
    if (this.#all.length === 0) return;
    out.push(`# HELP ${this.name} ${escapeHelp(this.#help)}`, `# TYPE ${this.name} ${this.#type}`);
    const all = [...this.#all];
    if (all.length > 1) all.sort(byLabelValues);
    for (const series of all) this.writeSeries(out, series);
  }
}

/** A mutable number. */
interface Cell {
  n: number;
}

/** A counter child: one series of a {@link Counter}. */
export interface CounterChild {
  /**
   * Adds `by` (default 1).
   *
   * @throws {RangeError} when `by` is negative or not finite.
   */
  inc(by?: number): void;
}

/** A monotonically increasing count per label set (client_golang `CounterVec`). */
export class Counter extends Vector<Cell> {
  constructor(opts: MetricOptions) {
    super(opts, "counter");
  }

  protected initial(): Cell {
    return { n: 0 };
  }

  /** The series of `labels` (created at 0, and so written from now on). */
  labels(labels: Labels = {}): CounterChild {
    const cell = this.series(labels).value;
    const name = this.name;
    return {
      inc(by = 1) {
        checkIncrement(name, by);
        cell.n += by;
      },
    };
  }

  /** Adds `by` (default 1) to the series of `labels`. */
  inc(labels: Labels = {}, by = 1): void {
    checkIncrement(this.name, by);
    this.series(labels).value.n += by;
  }

  protected writeSeries(out: string[], series: Series<Cell>): void {
    out.push(sample(this.name, series.labelText, series.value.n));
  }
}

/** A gauge child: one series of a {@link Gauge}. */
export interface GaugeChild {
  set(value: number): void;
  inc(by?: number): void;
  dec(by?: number): void;
}

/** A value that goes up and down, per label set (client_golang `GaugeVec`). */
export class Gauge extends Vector<Cell> {
  readonly #collect: ((gauge: Gauge) => void) | undefined;

  constructor(opts: GaugeOptions) {
    super(opts, "gauge");
    this.#collect = opts.collect;
  }

  protected initial(): Cell {
    return { n: 0 };
  }

  /** The series of `labels` (created at 0, and so written from now on). */
  labels(labels: Labels = {}): GaugeChild {
    const cell = this.series(labels).value;
    return {
      set(value) {
        cell.n = value;
      },
      inc(by = 1) {
        cell.n += by;
      },
      dec(by = 1) {
        cell.n -= by;
      },
    };
  }

  /** Sets the series of `labels` to `value`. */
  set(labels: Labels, value: number): void {
    this.series(labels).value.n = value;
  }

  override write(out: string[]): void {
    this.#collect?.(this);
    super.write(out);
  }

  protected writeSeries(out: string[], series: Series<Cell>): void {
    out.push(sample(this.name, series.labelText, series.value.n));
  }
}

/** A histogram child: one series of a {@link Histogram}. */
export interface HistogramChild {
  /**
   * Counts `value` in the first bucket whose upper bound is at least `value`.
   *
   * @throws {RangeError} when `value` is not a finite number.
   */
  observe(value: number): void;
}

/** The state of one histogram series; `counts` are per bucket, not cumulative. */
interface HistogramCells {
  counts: Float64Array;
  sum: number;
  count: number;
}

/** Observations counted in buckets, per label set (client_golang `HistogramVec`). */
export class Histogram extends Vector<HistogramCells> {
  readonly #bounds: readonly number[];
  /** `le` label values of the bounds. */
  readonly #le: readonly string[];

  constructor(opts: HistogramOptions) {
    super(checkBuckets(opts), "histogram");
    this.#bounds = [...opts.buckets];
    this.#le = this.#bounds.map(formatNumber);
  }

  protected initial(): HistogramCells {
    return { counts: new Float64Array(this.#bounds.length), sum: 0, count: 0 };
  }

  /** The series of `labels` (created empty, and so written from now on). */
  labels(labels: Labels = {}): HistogramChild {
    const cells = this.series(labels).value;
    return { observe: (value) => this.#observe(cells, value) };
  }

  /** Observes `value` in the series of `labels`. */
  observe(labels: Labels, value: number): void {
    this.#observe(this.series(labels).value, value);
  }

  /**
   * Adds every observation of `source`, a histogram with the same buckets, to this one: each of
   * its series to the series of the same labels plus `extraLabels`. `source` is left as it is.
   *
   * @throws {Error} when the buckets differ, or when a series' labels and `extraLabels` together
   *   do not name exactly this histogram's labels.
   */
  addFrom(source: Histogram, extraLabels: Labels = {}): void {
    const bounds = source.#bounds;
    if (bounds.length !== this.#bounds.length || bounds.some((b, i) => b !== this.#bounds[i])) {
      throw new Error(`Cannot add ${source.name} to ${this.name}: their buckets differ`);
    }
    for (const [labels, from] of source.entries()) {
      const into = this.series({ ...labels, ...extraLabels }).value;
      for (let i = 0; i < from.counts.length; i++) into.counts[i]! += from.counts[i]!;
      into.sum += from.sum;
      into.count += from.count;
    }
  }

  #observe(cells: HistogramCells, value: number): void {
    if (!Number.isFinite(value)) {
      throw new RangeError(`Cannot observe ${value} in ${this.name}: not a finite number`);
    }
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    if (i < bounds.length) cells.counts[i]!++;
    cells.sum += value;
    cells.count++;
  }

  protected writeSeries(out: string[], series: Series<HistogramCells>): void {
    const { counts, sum, count } = series.value;
    const bucket = `${this.name}_bucket{${series.labelText === "" ? "" : series.labelText + ","}`;
    let cumulative = 0;
    for (let i = 0; i < counts.length; i++) {
      cumulative += counts[i]!;
      out.push(`${bucket}le="${this.#le[i]}"} ${formatNumber(cumulative)}`);
    }
    out.push(`${bucket}le="+Inf"} ${formatNumber(count)}`);
    out.push(sample(`${this.name}_sum`, series.labelText, sum));
    out.push(sample(`${this.name}_count`, series.labelText, count));
  }
}

function checkBuckets(opts: HistogramOptions): HistogramOptions {
  const bounds = opts.buckets;
  for (const [i, b] of bounds.entries()) {
    if (!Number.isFinite(b) || (i > 0 && b <= bounds[i - 1]!)) {
      throw new Error(
        `Buckets of metric ${opts.name} must be finite and strictly increasing: ${bounds}`,
      );
    }
  }
  return opts;
}

function checkIncrement(name: string, by: number): void {
  if (!(by >= 0) || by === Infinity) {
    throw new RangeError(`Cannot add ${by} to counter ${name}: not a finite non-negative number`);
  }
}

function sample(name: string, labelText: string, value: number): string {
  return labelText === ""
    ? `${name} ${formatNumber(value)}`
    : `${name}{${labelText}} ${formatNumber(value)}`;
}

/**
 * A sample value or `le` bound as the text format writes it: `NaN`, `+Inf`, `-Inf`, or
 * JavaScript's shortest form. Also for collectors that write their own sample lines (the process
 * metrics).
 */
export function formatNumber(n: number): string {
  if (Number.isNaN(n)) return "NaN";
  if (n === Infinity) return "+Inf";
  if (n === -Infinity) return "-Inf";
  return String(n);
}

/** A label value as the text format quotes it: `\`, `"` and newline escaped. */
function escapeLabelValue(value: string): string {
  return /[\\"\n]/.test(value)
    ? value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n")
    : value;
}

/** A help text as the text format writes it: `\` and newline escaped. */
function escapeHelp(help: string): string {
  return help.replaceAll("\\", "\\\\").replaceAll("\n", "\\n");
}

/** client_golang's order of the series of a family: by label values, label by label. */
function byLabelValues(a: Series<unknown>, b: Series<unknown>): number {
  for (let i = 0; i < a.values.length; i++) {
    const x = a.values[i]!;
    const y = b.values[i]!;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}
