// A deterministic mix of text lines for tokenizer comparisons: code, CJK, emoji, whitespace
// runs, numbers, several scripts, special tokens written as text.

function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const words = [
  'the', 'quick', 'brown', 'fox', "don't", "it's", "we're", "they've", "I'll", "she'd", 'naïve', 'café', 'Zürich',
  'straße', 'über', 'Ελλάδα', 'москва', 'привет', 'مرحبا', 'שלום', 'नमस्ते', 'ภาษาไทย', 'tiếng', 'Việt', 'İstanbul',
  'HTTP', 'JSON', 'camelCase', 'snake_case', 'kebab-case', 'URL', 'https://example.com/a?b=1&c=2', 'e-mail',
  'user@example.org', '#hashtag', '@mention', 'v1.2.3', 'C++', 'O(n²)', '½', '€5', '$10.99', '100%', '°C',
];
const code = [
  'int main(int argc, char** argv) {', '  return 0;', '}', 'for (size_t i = 0; i < n; ++i) sum += a[i];',
  'def f(x):\n    return x ** 2', 'const y = await fetch(`/api/${id}`);', '#include <vector>',
  '    if (ptr == nullptr) { throw std::runtime_error("null"); }', 'SELECT id, name FROM users WHERE age >= 18;',
  '<div class="a">&nbsp;</div>', 'x = [1, 2, 3]  # comment', 'fn main() -> Result<(), Box<dyn Error>> {',
  '\t\tcase 0x7f: break;', 'let mut v: Vec<u8> = Vec::with_capacity(1024);', '}}}}', '(((a)))', '/* ** */',
];
const specials = ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<|begin_of_text|>', '<|eot_id|>', '<think>', '</think>', '<tool_call>'];
const emoji = ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🇫🇷', '🇯🇵', '❤️', '🔥', '🤖', '✨', '🧑🏻‍💻', '☃', '⚡'];

export function textLines(count, seed = 43) {
  const random = mulberry32(seed);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
  const codePoint = (lo, hi) => String.fromCodePoint(int(lo, hi));
  const whitespace = () => pick([' ', '  ', '   ', '\t', '\n', '\n\n', ' \n', '\r\n', '\u00a0', '\u3000', '    ', '\t \t']);
  const cjk = (n) => Array.from({ length: n }, () => pick([
    () => codePoint(0x4e00, 0x9fff), () => codePoint(0x3040, 0x309f), () => codePoint(0x30a0, 0x30ff),
    () => codePoint(0xac00, 0xd7a3), () => pick(['，', '。', '！', '「', '」', '、']),
  ])()).join('');
  const number = () => pick([
    () => String(int(0, 9)), () => String(int(0, 99999999)), () => `${int(0, 999)}.${int(0, 99999)}`,
    () => `${int(1, 999)},${String(int(0, 999)).padStart(3, '0')}`, () => `-${int(0, 1e6)}e${int(-9, 9)}`,
    () => '0x' + int(0, 0xffffff).toString(16), () => String(int(1900, 2100)) + '-' + String(int(1, 12)).padStart(2, '0'),
  ])();
  const kinds = [
    () => Array.from({ length: int(3, 12) }, () => pick(words)).join(pick([' ', ' ', ', ', '. '])),
    () => Array.from({ length: int(1, 3) }, () => pick(code)).join('\n'),
    () => cjk(int(2, 30)),
    () => Array.from({ length: int(1, 8) }, () => pick([pick(emoji), pick(words), ' '])).join(''),
    () => Array.from({ length: int(1, 10) }, () => pick([whitespace(), pick(words)])).join(''),
    () => Array.from({ length: int(1, 8) }, () => number()).join(pick([' ', '', '+', ' * ', '/'])),
    () => pick(words) + pick(specials) + pick(words) + ' ' + pick(specials) + cjk(2),
    () => Array.from({ length: int(2, 10) }, () => pick([() => pick(words), () => cjk(int(1, 4)), () => number(),
      () => pick(emoji), () => whitespace(), () => pick(code)])()).join(''),
  ];
  return Array.from({ length: count }, () => pick(kinds)());
}
