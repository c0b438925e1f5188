// A third published modern MCP client, the official TypeScript client v2
// (@modelcontextprotocol/client, pinned in package.json and package-lock.json), drives the
// reference bridge in front of the reference testee over stdio and over Streamable HTTP, speaking
// MCP 2026-07-28 (the stateless revision).
//
// Per transport, each step printed as it passes:
//   connect  versionNegotiation mode 'auto': server/discover first, initialize only as a
//            fallback; the negotiated version must be 2026-07-28
//   list     tools/list: echo, toggle and ask listed, the hidden tool secret not
//   call     tools/call echo returns its text; fail_soft is an isError result
//   listen   client.listen({toolsListChanged: true}) is acknowledged; tools/call toggle
//            {enable: true} makes the testee enable secret, so notifications/tools/list_changed
//            must reach the client's handler; tools/list then lists secret
//   mrtr     tools/call ask: the testee sends a SamplingRequest, which the bridge turns into an
//            InputRequiredResult; the client fulfils it with its sampling/createMessage handler
//            and retries; the result must be that handler's answer, asked once
//
// Usage: node main.mjs --bin path/to/protomcp-conform [--transport stdio|http|both]
// Exit status 0 when every step passes; 1 with the failing step otherwise. Every wait is bounded,
// and every bridge runs in a process group of its own that is ended at the end.
import { spawn } from 'node:child_process';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const WANT_VERSION = '2026-07-28';
const MODEL_ANSWER = "42, says the TypeScript client's model";
const STEP_MS = 15000;

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

function step(transport, name, what) {
  console.log(`ts-modern: ${transport}: ${name}: ${what}`);
}

function check(cond, what) {
  if (!cond) throw new Error(what);
}

function bounded(promise, what, ms = STEP_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function session(transport, makeTransport) {
  let asked = 0;
  let changed = 0;
  let onChange = () => {};
  const client = new Client(
    { name: 'protomcp-conform-ts-modern', version: '1.0.0' },
    { capabilities: { sampling: {} }, versionNegotiation: { mode: 'auto' } }
  );
  client.setRequestHandler('sampling/createMessage', async () => {
    asked += 1;
    return { model: 'ts-client-model', role: 'assistant', content: { type: 'text', text: MODEL_ANSWER } };
  });
  client.setNotificationHandler('notifications/tools/list_changed', () => {
    changed += 1;
    onChange();
  });
  await bounded(client.connect(makeTransport()), 'connect');
  try {
    const version = client.getNegotiatedProtocolVersion();
    check(version === WANT_VERSION, `connect: negotiated ${version}, want ${WANT_VERSION}`);
    step(transport, 'connect', `${version} through server/discover`);

    const names = async () => (await bounded(client.listTools(undefined, { cacheMode: 'refresh' }), 'tools/list')).tools.map(t => t.name).sort();
    const listed = await names();
    check(['echo', 'toggle', 'ask'].every(n => listed.includes(n)) && !listed.includes('secret'), `list: ${listed}`);
    step(transport, 'list', listed.join(', '));

    const echo = await bounded(client.callTool({ name: 'echo', arguments: { text: 'hello from typescript, modern' } }), 'echo');
    check(!echo.isError && echo.content[0]?.text === 'hello from typescript, modern', `call: echo gave ${JSON.stringify(echo)}`);
    const soft = await bounded(client.callTool({ name: 'fail_soft', arguments: {} }), 'fail_soft');
    check(soft.isError === true, `call: fail_soft gave ${JSON.stringify(soft)}`);
    step(transport, 'call', 'echo, fail_soft (isError)');

    const sub = await bounded(client.listen({ toolsListChanged: true }), 'subscriptions/listen');
    try {
      step(transport, 'listen', `acknowledged (${JSON.stringify(sub.honoredFilter)})`);
      const heard = new Promise(resolve => {
        onChange = resolve;
        if (changed > 0) resolve();
      });
      const toggled = await bounded(client.callTool({ name: 'toggle', arguments: { enable: true } }), 'toggle');
      check(!toggled.isError, `listen: toggle gave ${JSON.stringify(toggled)}`);
      await bounded(heard, 'listen: notifications/tools/list_changed');
      const after = await names();
      check(after.includes('secret'), `listen: secret not listed after the change: ${after}`);
      step(transport, 'listen', 'tools/list_changed after toggle; secret now listed');
    } finally {
      await bounded(sub.close(), 'listen: close');
    }

    const answer = await bounded(client.callTool({ name: 'ask', arguments: { question: 'What is 6 x 7?' } }), 'ask');
    const text = answer.content?.[0]?.text;
    check(!answer.isError && text === MODEL_ANSWER, `mrtr: ask gave ${JSON.stringify(answer)}`);
    check(asked === 1, `mrtr: the sampling handler ran ${asked} times, want once`);
    step(transport, 'mrtr', `ask answered ${JSON.stringify(text)} through InputRequiredResult and a retry`);
  } finally {
    await bounded(client.close(), 'close').catch(() => {});
  }
}

function startHttp(bin) {
  const bridge = spawn(bin, ['bridge', '--transport', 'http', '--host', '127.0.0.1', '--port', '0', '--call-timeout', '5s', '--', bin, 'testee'], {
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  const url = new Promise((resolve, reject) => {
    let buffered = '';
    bridge.stderr.on('data', chunk => {
      process.stderr.write(chunk);
      buffered += chunk;
      const m = buffered.match(/protomcp-conform bridge: listening on (\S+)/);
      if (m) resolve(m[1]);
    });
    bridge.on('exit', () => reject(new Error('connect: the bridge exited before listening')));
  });
  return { bridge, url: bounded(url, 'connect: the bridge printing its address', 30000) };
}

function endGroup(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise(resolve => {
    const kill = setTimeout(() => {
      try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
    }, 3000);
    child.on('exit', () => { clearTimeout(kill); resolve(); });
    try { process.kill(-child.pid, 'SIGTERM'); } catch { clearTimeout(kill); resolve(); }
  });
}

async function main() {
  const bin = arg('--bin');
  const which = arg('--transport', 'both');
  if (!bin || !['stdio', 'http', 'both'].includes(which)) {
    console.error('usage: node main.mjs --bin path/to/protomcp-conform [--transport stdio|http|both]');
    process.exit(2);
  }
  let failed = 0;
  if (which !== 'http') {
    try {
      await session('stdio', () => new StdioClientTransport({ command: bin, args: ['bridge', '--call-timeout', '5s', '--', bin, 'testee'] }));
    } catch (e) {
      console.log(`ts-modern: stdio: FAILED: ${e?.message ?? e}`);
      failed = 1;
    }
  }
  if (which !== 'stdio') {
    const { bridge, url } = startHttp(bin);
    try {
      const at = await url;
      await session('http', () => new StreamableHTTPClientTransport(new URL(at)));
    } catch (e) {
      console.log(`ts-modern: http: FAILED: ${e?.message ?? e}`);
      failed = 1;
    } finally {
      await endGroup(bridge);
    }
  }
  process.exit(failed);
}

main();
