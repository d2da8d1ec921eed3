#!/usr/bin/env node
// The CLI is compiled to dist/ by `npm ci` / `npm install` (the `prepare` script).
import "../dist/cli/main.js";
