// Rolldown options merged into `jco componentize --bundle`: guests import the SDK as
// "@operon/sdk", which resolves to its TypeScript sources here.
import { fileURLToPath } from "node:url";

export default {
  // The contract's interfaces are imports of the component, not modules to bundle.
  external: [/^operon:engine\//],
  resolve: {
    alias: { "@operon/sdk": fileURLToPath(new URL("./src/index.ts", import.meta.url)) },
  },
};
