// Launches Debian's Chromium headless through playwright-core, with the flags that
// work on a machine without network (no background networking, no sandbox as root).
import path from 'node:path';
import { createRequire } from 'node:module';

// The test's npm packages live in build/node (NUPP_NODE_MODULES), not beside the scripts.
export const requireDep = createRequire(path.join(process.env.NUPP_NODE_MODULES || '.', 'x.js'));
const { chromium } = requireDep('playwright-core');

export async function launch() {
  return chromium.launch({
    executablePath: process.env.NUPP_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}
