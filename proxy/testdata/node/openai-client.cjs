// openai-client.cjs drives the rollout proxy with the openai npm client
// (TestOpenAINodeClient, tools_node_test.go): a chat completion, a call
// with tools answered by a tool call, the follow-up with the tool's
// result, and the same call streamed. Usage: node openai-client.cjs BASE_URL
// with OMAR_NPM_FIXTURES naming the node_modules that hold openai.
// Prints one JSON object with what the client parsed; exits 1 on any error.
const path = require("path");
const OpenAI = require(path.join(process.env.OMAR_NPM_FIXTURES, "openai"));

const tools = [{
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];

async function main() {
  const client = new OpenAI({ baseURL: process.argv[2], apiKey: "sk-test", maxRetries: 0,
    defaultHeaders: { "X-Omar-Session": "node" } });
  const out = {};
  const plain = await client.chat.completions.create({
    model: "omar", messages: [{ role: "user", content: "Hello there" }], max_tokens: 16 });
  out.plain = { content: plain.choices[0].message.content, finish: plain.choices[0].finish_reason };

  const ask = [{ role: "user", content: "Weather in Paris?" }];
  const called = await client.chat.completions.create({ model: "omar", messages: ask, tools, tool_choice: "auto" });
  const msg = called.choices[0].message;
  const call = msg.tool_calls[0];
  out.call = { finish: called.choices[0].finish_reason, content: msg.content, name: call.function.name,
    args: JSON.parse(call.function.arguments) };

  const answered = await client.chat.completions.create({ model: "omar", tools,
    messages: [...ask, msg, { role: "tool", tool_call_id: call.id, content: "18C" }] });
  out.answer = { content: answered.choices[0].message.content, finish: answered.choices[0].finish_reason };

  const stream = await client.chat.completions.create({ model: "omar", messages: ask, tools, stream: true,
    stream_options: { include_usage: true } });
  const streamed = { calls: [], finish: null, usage: null };
  for await (const chunk of stream) {
    if (chunk.usage) streamed.usage = chunk.usage.total_tokens;
    for (const ch of chunk.choices) {
      for (const tc of ch.delta.tool_calls || []) streamed.calls.push(tc.function.name);
      if (ch.finish_reason) streamed.finish = ch.finish_reason;
    }
  }
  out.stream = streamed;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
