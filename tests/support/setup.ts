import { setDefaultTimeout } from "bun:test";

/** Loaded before every test file (bunfig.toml). Timeouts bound hangs; they are not performance assertions. */
setDefaultTimeout(60_000);
