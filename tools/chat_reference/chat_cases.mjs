// The message lists rendered with each template: every case with and without a generation
// prompt, plus the template variables (chat_template_kwargs) a case sets.

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city, "quoted" and with ünïcode',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', description: 'City name, e.g. Zürich' },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        days: { type: 'integer', minimum: 1, maximum: 7.5 },
      },
      required: ['city'],
    },
  },
};
const search = {
  type: 'function',
  function: { name: 'search', description: 'Search the web', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
};

const call = (id, name, args) => ({ id, type: 'function', function: { name, arguments: args } });

export const cases = [
  { name: 'user only', messages: [{ role: 'user', content: 'Hello!' }] },
  { name: 'system and user', messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Hi there' }] },
  {
    name: 'multi-turn',
    messages: [
      { role: 'system', content: '  Be helpful.\n' },
      { role: 'user', content: 'What is 2+2?' },
      { role: 'assistant', content: 'It is 4.' },
      { role: 'user', content: 'And 3+3?' },
    ],
  },
  {
    name: 'earlier reasoning is dropped',
    messages: [
      { role: 'user', content: 'Think first: 2+2?' },
      { role: 'assistant', content: '<think>\nTwo plus two.\n</think>\n\nFour.' },
      { role: 'user', content: 'Now 3+3?' },
    ],
  },
  {
    name: 'reasoning_content field',
    messages: [
      { role: 'user', content: 'Q1' },
      { role: 'assistant', content: 'A1', reasoning_content: 'R1 thoughts' },
      { role: 'user', content: 'Q2' },
      { role: 'assistant', content: '<think>\nR2\n</think>\n\nA2' },
    ],
  },
  { name: 'thinking off', messages: [{ role: 'user', content: 'Quick answer please.' }], kwargs: { enable_thinking: false } },
  { name: 'thinking on', messages: [{ role: 'user', content: 'Take your time.' }], kwargs: { enable_thinking: true } },
  {
    name: 'unicode and whitespace',
    messages: [
      { role: 'system', content: '中文系统提示 😀' },
      { role: 'user', content: '  tabs\tand\nnewlines\n\n  and «quotes» "x" \'y\'  ' },
    ],
  },
  { name: 'tools', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: [weather] },
  {
    name: 'tools with system',
    messages: [{ role: 'system', content: 'Use tools wisely.' }, { role: 'user', content: 'Weather in Oslo and news?' }],
    tools: [weather, search],
  },
  {
    name: 'tool call and result',
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', tool_calls: [call('c1', 'get_weather', { city: 'Paris', unit: 'celsius' })] },
      { role: 'tool', tool_call_id: 'c1', content: '{"temperature": 21.5, "sky": "clear"}' },
    ],
    tools: [weather],
  },
  {
    name: 'tool call with text and a follow-up',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather in Köln?' },
      { role: 'assistant', content: 'Let me check.', tool_calls: [call('c2', 'get_weather', { city: 'Köln', days: 2 })] },
      { role: 'tool', tool_call_id: 'c2', content: 'Rain, 12 degrees' },
      { role: 'assistant', content: 'It rains in Köln: 12 degrees.' },
      { role: 'user', content: 'Thanks! And "Zürich"?' },
    ],
    tools: [weather],
  },
  {
    name: 'two tool calls, string arguments, two results',
    messages: [
      { role: 'user', content: 'Weather in Rome and news about it?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [call('a', 'get_weather', '{"city": "Rome"}'), call('b', 'search', '{"q": "Rome news"}')],
      },
      { role: 'tool', tool_call_id: 'a', content: 'Sunny' },
      { role: 'tool', tool_call_id: 'b', content: 'Nothing new' },
    ],
    tools: [weather, search],
  },
  {
    name: 'assistant last',
    messages: [
      { role: 'user', content: 'Say hi' },
      { role: 'assistant', content: 'Hi!' },
    ],
  },
  {
    name: 'continue final message',
    messages: [
      { role: 'user', content: 'Write a haiku about rust.' },
      { role: 'assistant', content: 'Red bloom on iron,' },
    ],
    continue_final_message: true,
  },
  {
    name: 'continue final message with thinking',
    messages: [
      { role: 'user', content: 'Count to three.' },
      { role: 'assistant', content: '<think>\nEasy.\n</think>\n\nOne, two' },
    ],
    continue_final_message: true,
  },
];

// Cases only one family's template reads.
export const llamaCases = [
  { name: 'custom date', messages: [{ role: 'user', content: 'What day is it?' }], kwargs: { date_string: '01 Jan 2025' } },
  {
    name: 'tools in system message',
    messages: [{ role: 'system', content: 'Sys' }, { role: 'user', content: 'Weather in Lima?' }],
    tools: [weather],
    kwargs: { tools_in_user_message: false },
  },
  {
    name: 'ipython result as object',
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', tool_calls: [call('c1', 'get_weather', { city: 'Paris' })] },
      { role: 'ipython', content: { temperature: 21, sky: 'clear' } },
    ],
    tools: [weather],
  },
  {
    name: 'two tool calls are refused',
    messages: [
      { role: 'user', content: 'Two things' },
      { role: 'assistant', tool_calls: [call('a', 'search', { q: 'x' }), call('b', 'search', { q: 'y' })] },
    ],
    tools: [search],
  },
];

// Mistral v0.3's template: tool call ids of exactly 9 characters, the system prompt prepended to
// the final user message, and roles that must alternate.
export const mistralCases = [
  {
    name: 'tool call and result, 9-character ids',
    messages: [
      { role: 'system', content: 'Answer with tools.' },
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [call('call00001', 'get_weather', { city: 'Paris', unit: 'celsius' })] },
      { role: 'tool', tool_call_id: 'call00001', content: '{"temperature": 21.5, "sky": "clear"}' },
    ],
    tools: [weather],
  },
  {
    name: 'two tool calls, two results, then an answer and a new question',
    messages: [
      { role: 'user', content: 'Weather in Rome and news about it?' },
      {
        role: 'assistant',
        content: '',
        tool_calls: [call('aaaaaaaa1', 'get_weather', '{"city": "Rome"}'), call('bbbbbbbb2', 'search', { q: 'Rome news' })],
      },
      { role: 'tool', tool_call_id: 'aaaaaaaa1', content: 'Sunny' },
      { role: 'tool_results', tool_call_id: 'bbbbbbbb2', content: 'Nothing new' },
      { role: 'assistant', content: '  Sunny, and no news.  ' },
      { role: 'user', content: 'Thanks! And «Zürich»? 😀' },
    ],
    tools: [weather, search],
  },
  {
    name: 'system dropped when an assistant message is last',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: '\n Hello! \t' },
    ],
  },
  {
    name: 'a tool call id of the wrong length is refused',
    messages: [
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', tool_calls: [call('short', 'get_weather', { city: 'Oslo' })] },
    ],
    tools: [weather],
  },
  { name: 'two user messages in a row are refused', messages: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }] },
  { name: 'an assistant message first is refused', messages: [{ role: 'assistant', content: 'a' }, { role: 'user', content: 'b' }] },
  {
    name: 'a system message later is refused',
    messages: [{ role: 'user', content: 'a' }, { role: 'system', content: 'b' }],
  },
  {
    name: 'system only',
    messages: [{ role: 'system', content: 'Nothing else.' }],
  },
];
