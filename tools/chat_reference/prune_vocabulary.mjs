// A tokenizer.json cut to what some id lists need: the merges that build their tokens
// (recursively), the tokens those merges touch, every token `isBase` keeps (single characters
// unless told) and the model's unk token. Ids and merge order are unchanged, so a cut that changed
// an encoding would fail the tests that compare against the whole file's ids.
export function pruneVocabulary(tokenizer, idLists, isBase = (t) => [...t].length === 1) {
  const model = tokenizer.model;
  const byId = new Map(Object.entries(model.vocab).map(([token, id]) => [id, token]));
  const merges = model.merges.map((m) => (Array.isArray(m) ? m : m.split(' ')));
  const producers = new Map();
  merges.forEach(([a, b], i) => {
    if (!producers.has(a + b)) producers.set(a + b, []);
    producers.get(a + b).push(i);
  });
  const keepTokens = new Set(Object.keys(model.vocab).filter(isBase));
  const keepMerges = new Set();
  const stack = [];
  for (const ids of idLists) for (const id of ids) if (byId.has(id)) stack.push(byId.get(id));
  while (stack.length) {
    const token = stack.pop();
    if (keepTokens.has(token) && [...token].length > 1) continue;
    keepTokens.add(token);
    for (const i of producers.get(token) ?? []) {
      if (keepMerges.has(i)) continue;
      keepMerges.add(i);
      stack.push(...merges[i]);
    }
  }
  if (model.unk_token != null && model.unk_token in model.vocab) keepTokens.add(model.unk_token);
  const vocab = Object.fromEntries(Object.entries(model.vocab).filter(([t]) => keepTokens.has(t)));
  const kept = model.merges.filter((_, i) => keepMerges.has(i));
  return { ...tokenizer, model: { ...model, vocab, merges: kept } };
}
