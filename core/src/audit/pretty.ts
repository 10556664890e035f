// `make logs`: audit JSON Lines on stdin, one readable line each on stdout.
import { createInterface } from 'node:readline';
import { formatEntry } from './format.js';

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim()) process.stdout.write(`${formatEntry(line, process.stdout.isTTY)}\n`);
});
