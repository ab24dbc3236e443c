// The dashboard's non-script files (the page and its stylesheet) go beside the compiled scripts in
// dist/ui, where sless serves them from; `npm run build` runs this after compiling ui/src.
import { copyFile, mkdir } from 'node:fs/promises';

const from = new URL('./', import.meta.url);
const to = new URL('../dist/ui/', import.meta.url);
await mkdir(to, { recursive: true });
for (const file of ['index.html', 'style.css']) await copyFile(new URL(file, from), new URL(file, to));
