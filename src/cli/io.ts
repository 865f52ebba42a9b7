// Where a command's lines go: the process's stdout and stderr, or a test's arrays.
export interface CliIo {
  out(text: string): void
  err(text: string): void
}

export const processIo: CliIo = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
}
