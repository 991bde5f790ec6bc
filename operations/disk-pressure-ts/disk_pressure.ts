// Disk pressure: which filesystems are fuller than a threshold, from `df -P` output.
//
// The TypeScript twin of operations/disk-pressure, with the same parameters (`df`,
// `input-key`, `threshold`, default 85), results (`disk.pressure`, `disk.worst_mount`,
// `disk.worst_percent`, `disk.over_threshold`, `disk.threshold`), table, gauge
// `disk_used_percent` and error messages.
import { type Input, Metric, OperonError, Output, log, operation } from "@operon/sdk";

/** What `threshold` is when not given: the usual "disk almost full" alert level. */
const DEFAULT_THRESHOLD = 85;

/** One line of `df -P`. */
interface Filesystem {
  name: string;
  mount: string;
  usedPercent: number;
}

export const run = operation((input: Input) => {
  const key = input.param("input-key");
  let df: string;
  if (key !== undefined) {
    df = input.require(key);
  } else {
    const found = input.param("df") ?? input.result("df");
    if (found === undefined) {
      throw new OperonError("missing required parameter `df` (the output of `df -P`)");
    }
    df = found;
  }
  const text = input.param("threshold");
  const threshold = text === undefined ? DEFAULT_THRESHOLD : parseThreshold(text);
  const filesystems = parseDf(df);
  const worst = filesystems.reduce((worst, fs) => (fs.usedPercent > worst.usedPercent ? fs : worst));
  const over = filesystems.filter((fs) => fs.usedPercent >= threshold);

  for (const fs of filesystems) {
    const gauge = Metric.gauge("disk_used_percent").label("mount", fs.mount).label("filesystem", fs.name);
    if (input.context.node !== undefined) gauge.label("node", input.context.node);
    gauge.set(fs.usedPercent);
  }
  log.info(
    `${over.length} of ${filesystems.length} filesystems at or over ${threshold}%; ` +
      `fullest is ${worst.mount} at ${worst.usedPercent}%`,
    { pressure: over.length > 0 },
  );
  return new Output()
    .result("disk.pressure", over.length > 0)
    .result("disk.worst_mount", worst.mount)
    .result("disk.worst_percent", worst.usedPercent)
    .result("disk.over_threshold", over.map((fs) => fs.mount).join(","))
    .result("disk.threshold", threshold)
    .output(table(filesystems, threshold));
});

/** A percentage, with or without the `%` sign. */
function parseThreshold(text: string): number {
  const number = text.trim().replace(/%+$/, "");
  if (/^\+?[0-9]+$/.test(number) && Number(number) <= 100) return Number(number);
  throw new OperonError(`parameter \`threshold\` must be a percentage from 0 to 100, got \`${text}\``);
}

/** Parses `df -P` output; a line that is neither the header nor a filesystem is an error
 * naming the line, since a silently skipped line could hide a full disk. */
function parseDf(text: string): Filesystem[] {
  const filesystems: Filesystem[] = [];
  text.split("\n").forEach((raw, index) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("Filesystem")) return;
    let parsed: Filesystem | undefined;
    try {
      parsed = parseLine(line);
    } catch (err) {
      throw new OperonError(
        `\`df\` line ${index + 1} (\`${line}\`) is not ` +
          `\`filesystem blocks used available capacity% mount\`: ${(err as Error).message}`,
      );
    }
    if (parsed !== undefined) filesystems.push(parsed);
  });
  if (filesystems.length === 0) throw new OperonError("the `df` output lists no filesystems");
  return filesystems;
}

/** One filesystem line; `undefined` for one without a capacity (df prints `-`). */
function parseLine(line: string): Filesystem | undefined {
  const fields = line.split(/\s+/);
  // Mount points may contain spaces: the capacity column is the first `N%` (or `-`)
  // preceded by three numeric columns.
  let capacity = -1;
  for (let at = 4; at < fields.length - 1; at++) {
    if (isCapacity(fields[at]!) && fields.slice(at - 3, at).every(isCount)) {
      capacity = at;
      break;
    }
  }
  if (capacity < 0) throw new Error("no capacity column");
  const percent = fields[capacity]!;
  if (percent === "-") return undefined;
  const usedPercent = Number(percent.replace(/%+$/, ""));
  if (usedPercent >= 2 ** 32) {
    throw new Error(`capacity \`${percent}\`: number too large to fit in target type`);
  }
  return {
    name: fields.slice(0, capacity - 3).join(" "),
    mount: fields.slice(capacity + 1).join(" "),
    usedPercent,
  };
}

const isCapacity = (field: string): boolean => field === "-" || /^[0-9]+%$/.test(field);
const isCount = (field: string): boolean => field === "-" || /^[0-9]+$/.test(field);

/** Every filesystem, the ones at or over the threshold flagged. */
function table(filesystems: Filesystem[], threshold: number): string {
  const width = (header: string, field: (fs: Filesystem) => string) =>
    Math.max(header.length, ...filesystems.map((fs) => [...field(fs)].length));
  const mountWidth = width("MOUNT", (fs) => fs.mount);
  const nameWidth = width("FILESYSTEM", (fs) => fs.name);
  const pad = (text: string, n: number) => text + " ".repeat(Math.max(0, n - [...text].length));
  let out = `${pad("MOUNT", mountWidth)}  ${pad("FILESYSTEM", nameWidth)}  USE%\n`;
  for (const fs of filesystems) {
    const flag = fs.usedPercent >= threshold ? `  >= ${threshold}%` : "";
    out += `${pad(fs.mount, mountWidth)}  ${pad(fs.name, nameWidth)}  ${String(fs.usedPercent).padStart(3)}%${flag}\n`;
  }
  return out;
}
