// Prints what @huggingface/transformers makes of the small hand-made SentencePiece-style file in
// tests/tokenizer/sentencepiece_test.cpp (Metaspace split / prepend_scheme always and never,
// fuse_unk, no byte fallback), whose ids and decodes that test expects. Run it as
// make_spm_reference.mjs is run: node tiny_reference.mjs
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AutoTokenizer, env } from '@huggingface/transformers';
const vocab = { '<unk>': 0, '<s>': 1, '</s>': 2, '<0x41>': 3, '<0xC3>': 4, '<0xA9>': 5, '▁': 6, 'a': 7, 'b': 8, '▁a': 9, '▁b': 10, 'ab': 11, '▁ab': 12 };
const merges = ['▁ a', 'a b', '▁a b', '▁ b'];
const make = (pre, fuse) => ({
  version: '1.0', added_tokens: [{ id: 1, content: '<s>', special: true, lstrip: false, rstrip: false, normalized: false, single_word: false },
    { id: 2, content: '</s>', special: true, lstrip: false, rstrip: false, normalized: false, single_word: false }],
  normalizer: null, pre_tokenizer: pre, post_processor: null,
  decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
  model: { type: 'BPE', unk_token: '<unk>', fuse_unk: fuse, byte_fallback: false, vocab, merges },
});
const lines = ['ab ab  b', ' ab', 'aé xyz b', 'b</s>ab ab', 'Aé'];
env.allowRemoteModels = false;
for (const [name, def] of Object.entries({
  always_split: make({ type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true }, true),
  never_nosplit_nofuse: make({ type: 'Metaspace', replacement: '▁', prepend_scheme: 'never', split: false }, false),
})) {
  const dir = path.join(os.tmpdir(), `tiny-${name}`);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(def));
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), '{}');
  env.localModelPath = os.tmpdir() + '/';
  const t = await AutoTokenizer.from_pretrained(`tiny-${name}`);
  for (const l of lines) { const ids = t.encode(l, { add_special_tokens: false }); console.log(name, JSON.stringify(l), JSON.stringify(ids), JSON.stringify(t.decode(ids))); }
}
