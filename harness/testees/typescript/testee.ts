// The protomcp-conform testee for the TypeScript SDK (npm package `protomcp`, written against 0.3.0).
//
// It registers the fixture of harness/testees/README.md (spec Appendix B) through the SDK's public
// API only, the way its documentation writes tools: zod schemas for the arguments, handlers that
// destructure them (checking arguments against the schema is the SDK's job, TP-CALL-09/10/12),
// ToolResult for results and errors, thrown errors for failing handlers. Items the 0.3.0 API cannot
// express (a logger that reaches the bridge, sampling, roots, streams) are left out;
// protomcp-conform.toml lists them with the reason. Two settings that tool() and resource() do not
// take (the hidden flag the API reference documents for tool(), a resource's size) are set on the
// definitions they return, which are the registry's entries.
//
// Started with --middleware it also registers the protocol middleware guard, mirror and broken.

import {
  completion,
  middleware,
  prompt,
  resource,
  resourceTemplate,
  run,
  tool,
  toolManager,
  ToolContext,
  ToolResult,
} from 'protomcp';
import { z } from 'zod';

// The largest n that big and big_err are declared for: a result_json of at most 64 MiB.
const MAX_BIG = 67_108_837;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ------------------------------------------------------------------ tools (Appendix B.1)

tool({
  name: 'echo',
  description: 'Returns its text argument',
  args: z.object({ text: z.string().describe('the text to return') }),
  handler({ text }) {
    return new ToolResult({ result: text });
  },
});

tool({
  name: 'add',
  description: 'Returns the decimal sum of a and b',
  args: z.object({ a: z.number().int().describe('first addend'), b: z.number().int().describe('second addend') }),
  handler({ a, b }) {
    return new ToolResult({ result: String(a + b) });
  },
});

tool({
  name: 'fail',
  description: 'Always fails: the handler throws',
  args: z.object({}),
  handler() {
    throw new Error('fixture failure');
  },
});

tool({
  name: 'fail_soft',
  description: 'Returns a structured, retryable error',
  args: z.object({}),
  handler() {
    return new ToolResult({
      result: 'soft failure',
      isError: true,
      errorCode: 'E_FIXTURE',
      message: 'soft failure',
      suggestion: 'retry later',
      retryable: true,
    });
  },
});

tool({
  name: 'slow',
  description: 'Takes 100 ms per step, reports progress, stops when cancelled',
  args: z.object({ steps: z.number().int().describe('number of 100 ms steps') }),
  async handler({ steps }, ctx: ToolContext) {
    for (let i = 1; i <= steps; i++) {
      await sleep(100);
      if (ctx.isCancelled()) {
        return new ToolResult({ result: 'cancelled' });
      }
      ctx.reportProgress(i, steps, `step ${i}`);
    }
    return new ToolResult({ result: `done ${steps}` });
  },
});

tool({
  name: 'big',
  description: 'Returns n x characters',
  args: z.object({ n: z.number().int().min(0).max(MAX_BIG).describe('how many') }),
  handler({ n }) {
    return new ToolResult({ result: 'x'.repeat(n) });
  },
});

tool({
  name: 'big_err',
  description: 'Returns n x characters as an error result',
  args: z.object({ n: z.number().int().min(0).max(MAX_BIG).describe('how many') }),
  handler({ n }) {
    return new ToolResult({ result: 'x'.repeat(n), isError: true, errorCode: 'E_BIG', message: 'big error' });
  },
});

tool({
  name: 'toggle',
  description: 'Enables or disables the secret tool',
  args: z.object({ enable: z.boolean().describe('true enables secret, false disables it') }),
  handler({ enable }) {
    return enable
      ? new ToolResult({ result: 'ok', enableTools: ['secret'] })
      : new ToolResult({ result: 'ok', disableTools: ['secret'] });
  },
});

// Appendix B registers secret hidden. The API reference documents a `hidden` option of tool(), but
// 0.3.0's tool() drops it (its ToolOptions type does not even declare it). tool() returns the
// registry's ToolDef, documented with a public `hidden` field, and run() hides the tools whose def
// says so: that is the way 0.3.0 offers.
const secret = tool({
  name: 'secret',
  description: 'Returns secret',
  args: z.object({}),
  handler() {
    return new ToolResult({ result: 'secret' });
  },
});
secret.hidden = true;

// Structured output as the TypeScript guide documents it: an `output` schema, the result as JSON
// text (ToolResult has no structured-content field).
tool({
  name: 'structured',
  description: 'Returns structured content',
  args: z.object({}),
  output: z.object({ answer: z.number().int().optional() }),
  handler() {
    return new ToolResult({ result: JSON.stringify({ answer: 42 }) });
  },
});

tool({
  name: 'narrow',
  description: 'Narrows the active tool set to echo and narrow',
  args: z.object({}),
  async handler() {
    const active = await toolManager.setAllowed(['echo', 'narrow']);
    return new ToolResult({ result: active.join(',') });
  },
});

// ------------------------------------------------------------------ resources, prompts, completions (B.2)

// resource() takes no size, but it returns the registry's ResourceDef (an exported type with a
// public `size`), which run() lists as it is.
const staticResource = resource({
  uri: 'fixture://static',
  name: 'static',
  description: 'A static text',
  mimeType: 'text/plain',
  handler: (uri) => ({ uri, text: 'static-content', mimeType: 'text/plain' }),
});
staticResource.size = 14;

resourceTemplate({
  uriTemplate: 'fixture://item/{id}',
  name: 'item',
  description: 'One item',
  mimeType: 'text/plain',
  handler: (uri) => ({ uri, text: `item ${uri.slice('fixture://item/'.length)}`, mimeType: 'text/plain' }),
});

const blobResource = resource({
  uri: 'fixture://blob',
  name: 'blob',
  description: 'Four bytes of binary content',
  mimeType: 'application/octet-stream',
  handler: (uri) => ({ uri, blob: new Uint8Array([0x00, 0xff, 0x10, 0x80]), mimeType: 'application/octet-stream' }),
});
blobResource.size = 4;

resource({
  uri: 'fixture://item/0',
  name: 'item-zero',
  description: 'A static resource the item template also matches',
  mimeType: 'text/plain',
  handler: (uri) => ({ uri, text: 'static item zero', mimeType: 'text/plain' }),
});

resource({
  uri: 'fixture://fail',
  name: 'fail',
  description: 'A resource whose handler always fails',
  mimeType: 'text/plain',
  handler: () => {
    throw new Error('fixture failure');
  },
});

prompt({
  name: 'greet',
  description: 'Greets someone',
  arguments: [{ name: 'name', description: 'who', required: true }],
  handler: (args) => [{ role: 'user', content: `Hello, ${args.name}!` }],
});

prompt({
  name: 'fail',
  description: 'A prompt whose handler always fails',
  arguments: [{ name: 'x', description: 'ignored' }],
  handler: () => {
    throw new Error('fixture failure');
  },
});

function candidates(all: string[]) {
  return (value: string) => {
    const values = all.filter((c) => c.startsWith(value));
    return { values, total: values.length, hasMore: false };
  };
}

completion('ref/prompt', 'greet', 'name', candidates(['alice', 'bob', 'bobby']));
completion('ref/resource', 'fixture://item/{id}', 'id', candidates(['1', '2', '10']));
completion('ref/prompt', 'fail', 'x', () => {
  throw new Error('fixture failure');
});

// ------------------------------------------------------------------ middleware variant (B.3)

// The arguments object with "mw" added, every other member kept as sent (no re-spelling).
function withMw(argsJson: string, value: string): string {
  const text = argsJson.trim() === '' ? '{}' : argsJson;
  const parsed: unknown = JSON.parse(text);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error('arguments are not a JSON object');
  }
  const inner = text.trim().slice(1, -1);
  const mw = `"mw":${JSON.stringify(value)}`;
  return inner.trim() === '' ? `{${mw}}` : `{${inner},${mw}}`;
}

function registerProtocolMiddleware() {
  middleware('guard', 1, (phase, toolName) => {
    if (phase === 'before' && toolName === 'secret') {
      return { reject: true, rejectReason: 'blocked by guard' };
    }
    return {};
  });

  middleware('mirror', 10, (phase, toolName, argsJson, _resultJson, isError) => {
    if (phase === 'before') {
      return { argumentsJson: withMw(argsJson, `before:${toolName}`) };
    }
    if (phase === 'after') {
      return { resultJson: JSON.stringify([{ type: 'text', text: `after:${toolName}:${isError ? 'true' : 'false'}` }]) };
    }
    return {};
  });

  middleware('broken', 20, (_phase, toolName) => {
    if (toolName === 'boom') {
      throw new Error('broken middleware fails on boom');
    }
    return {};
  });
}

if (process.argv.slice(2).includes('--middleware')) {
  registerProtocolMiddleware();
}

// The guides start the file with `pmcp dev server.ts` and never show this call, but nothing else
// connects: run() is the exported entry point that serves PROTOMCP_SOCKET.
await run();
