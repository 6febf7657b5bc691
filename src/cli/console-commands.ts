/** Console commands of the CLI (`keys …`, `accounts …`), registered on the root program. */
import type { Command } from 'commander';

export function registerConsoleCommands(_program: Command): void {
  // filled by the console-side work (issue 3)
}
