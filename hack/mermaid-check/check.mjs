// Parses each file named on the command line — a Mermaid diagram, or a
// Markdown file whose ```mermaid blocks are parsed one by one — with
// Mermaid's own parser, and exits 1 naming each diagram Mermaid refuses.
// Mermaid's sanitizer needs a DOM: jsdom provides it.
import { JSDOM } from 'jsdom';
import fs from 'node:fs';

const dom = new JSDOM('<!doctype html><html><body></body></html>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import('mermaid');

function diagrams(file) {
  const text = fs.readFileSync(file, 'utf8');
  if (!file.endsWith('.md')) return [{ where: file, text }];
  const out = [];
  const re = /^```mermaid\n([\s\S]*?)^```/gm;
  for (let m; (m = re.exec(text)); ) {
    const line = text.slice(0, m.index).split('\n').length;
    out.push({ where: `${file}:${line}`, text: m[1] });
  }
  return out;
}

let refused = 0, parsed = 0;
for (const file of process.argv.slice(2)) {
  for (const d of diagrams(file)) {
    try {
      await mermaid.parse(d.text);
      parsed++;
    } catch (e) {
      refused++;
      console.error(`${d.where}: Mermaid refuses it: ${e.message}`);
    }
  }
}
console.log(`${parsed} parsed, ${refused} refused`);
process.exit(refused ? 1 : 0);
