// `make logs`: audit JSON Lines on stdin, one readable line each on stdout.
import { createInterface } from 'node:readline';
import { formatEntry } from './format.js';

// In a container fed by a pipe stdout is no terminal: `make logs` says whether the user's is.
const color = process.stdout.isTTY || process.env.CARAPACE_COLOR === '1';
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim()) process.stdout.write(`${formatEntry(line, color)}\n`);
});
