// Values hook: the TypeScript twin of operations/fixtures/values-hook.
//
// The hook of an addon module (or a global hook), reading and patching its values
// through `values`, as addon-operator's shell hooks do through `$VALUES_PATH` and
// `$VALUES_JSON_PATCH_PATH`. It declares `beforeHelm` (order 10). Its section is the
// values key other than `global` (the module's), or `global` when there is none. It
// reads `replicas` there (default 1) and submits
// `add /<section>/internal/wasmReplicas = 2 * replicas` and
// `add /<section>/internal/wasmRuns = <the runs counted so far + 1>`; when the section
// has `patchConfig: true` it also adds `/<section>/wasmSeen = true` to the config
// values. The values it saw are its output's `validating` message; it logs
// `values patched`.
import { config, hook, log, values } from "@operon/sdk";

/** `value` when it is a JSON unsigned integer (as the Rust twin's `as_u64`). */
function count(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined;
}

export const { configure, handle } = hook({
  configure: () => config({ lifecycle: [{ binding: "before-helm", order: 10 }] }),

  handle() {
    const seen = values.get();
    const section = Object.keys(seen).find((k) => k !== "global") ?? "global";
    const entry = seen[section];
    const mine: { [key: string]: values.Json } =
      typeof entry === "object" && entry !== null && !Array.isArray(entry) ? entry : {};
    const replicas = count(mine.replicas) ?? 1;
    const internal = mine.internal;
    const previous =
      typeof internal === "object" && internal !== null && !Array.isArray(internal)
        ? count(internal.wasmRuns)
        : undefined;
    const runs = (previous ?? 0) + 1;
    const ops: values.Operation[] = [];
    if (!("internal" in mine)) {
      ops.push(values.add(`/${section}/internal`, {}));
    }
    ops.push(values.add(`/${section}/internal/wasmReplicas`, replicas * 2));
    ops.push(values.add(`/${section}/internal/wasmRuns`, runs));
    values.patch(ops);
    if (mine.patchConfig === true) {
      const configOps: values.Operation[] = [];
      if (!(section in values.getConfig())) {
        configOps.push(values.add(`/${section}`, {}));
      }
      configOps.push(values.add(`/${section}/wasmSeen`, true));
      values.patchConfig(configOps);
    }
    log.info("values patched", { section, replicas });
    return { validating: { allowed: true, message: JSON.stringify(seen), warnings: [] } };
  },
});
