import { defineConfig, mergeConfig } from "vitest/config";
import base from "../../vitest.config.js";

/**
 * The suite under adversity: `TILLER_TEST_FDATASYNC_DELAY_MS=15 npx vitest run --config
 * test/support/adverse.config.ts <files>` slows every fdatasync of the test process (see
 * slowDisk.ts); run it beside a busy loop (`node -e 'for(;;){}' &`) for a loaded CPU too.
 */
export default mergeConfig(base, defineConfig({ test: { setupFiles: ["test/support/slowDisk.ts"] } }));
