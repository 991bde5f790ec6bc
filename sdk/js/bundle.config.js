// Rolldown options merged into `jco componentize --bundle`: guests import the SDK as
// "@operon/sdk", which resolves to its TypeScript sources here.
import { fileURLToPath } from "node:url";

export default {
  // The contract's interfaces are imports of the component, not modules to bundle.
  external: [/^operon:engine\//],
  // Importing an interface has no side effect, so an import the guest never calls is
  // dropped: the SDK's index reaches every interface (values too), and a world that
  // lacks one (values is only in the hook world) must still build.
  treeshake: {
    moduleSideEffects: (id, external) => !(external && id.startsWith("operon:engine/")),
  },
  resolve: {
    alias: { "@operon/sdk": fileURLToPath(new URL("./src/index.ts", import.meta.url)) },
  },
};
