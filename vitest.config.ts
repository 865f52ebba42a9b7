import { tmpdir } from 'node:os'
import path from 'node:path'
import { defineConfig } from 'vitest/config'
import { BaseSequencer, type TestSpecification } from 'vitest/node'

/**
 * The kill -9 files (test/crash.*.test.ts) are the long poles (20 rounds each in CI) yet tiny, and
 * without recorded timings vitest runs larger files first: start them first, one per worker.
 */
class LongPolesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files)
    const longPole = (file: TestSpecification) => /[/\\]test[/\\]crash\.\w+\.test\.ts$/.test(file.moduleId)
    return [...sorted.filter(longPole), ...sorted.filter((file) => !longPole(file))]
  }
}

export default defineConfig({
  // The SDK from its source, as tsconfig.json's paths say (src/cli/listen.ts imports it).
  resolve: { alias: { '@contacts-api/client': path.resolve('packages/client/src/index.ts') } },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // PGlite instances are heavy (WASM); two workers fit the 2-core machine.
    maxWorkers: 2,
    // A worker's files share its modules: the app's modules load once per worker, not once per
    // file (that was ~20 s of the suite's CPU), and test/harness.ts hands emptied PGlites on from
    // file to file. Nothing keeps state in a module between files: each file builds its own
    // harnesses, servers and clocks.
    isolate: false,
    sequence: { sequencer: LongPolesFirst },
    // The server, CLI and fixture processes the suites start reuse V8's compiled code of the modules
    // every earlier start compiled (Node keys the cache by its version).
    env: { NODE_COMPILE_CACHE: path.join(tmpdir(), 'contacts-api-compile-cache') },
  },
})
