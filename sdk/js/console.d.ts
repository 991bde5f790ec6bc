// The one global of the guest environment the SDK uses: StarlingMonkey's console, whose
// error stream is the component's stderr (captured by the host with the run).
declare const console: { error(...data: unknown[]): void };
