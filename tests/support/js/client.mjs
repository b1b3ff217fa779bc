#!/usr/bin/env node
// Scenario runner that drives an MCP server with the official TypeScript SDK
// client (@modelcontextprotocol/sdk). Used by mcphost's pytest suite via
// tests/support/js/run.py.
//
// Usage:
//   node client.mjs [options] --stdio -- <command> [args...]
//   node client.mjs [options] --http <url>
//
// Options:
//   --script <json|@file|->   JSON array of steps (inline, from a file, or stdin)
//   --timeout <ms>            overall budget for the whole run (default 20000)
//   --elicit <json>           declare elicitation; accept requests with this content
//   --elicit-action <a>       accept (default) | decline | cancel
//   --sample <text>           declare sampling; answer with this text (model "ts-test-model")
//   --roots <json>            declare roots (listChanged); answer roots/list with [{uri,name}]
//   --header 'Name: value'    extra HTTP header (repeatable, --http only)
//   --client-name <name>      clientInfo.name (default "mcphost-ts-test-client")
//
// Steps (run in order; any step may carry "id" (echoed back), "timeout_ms"
// (per-request timeout), "progress": true (request progress, callbacks go to
// "progress"), "cancel_after_ms" (abort -> SDK sends notifications/cancelled),
// "drop_after_events" (--http only: n >= 1; the harness cuts the SSE response of
// the request this step POSTs after n events that carry data - the priming event
// does not count - by cancelling the body, which closes the connection; the SDK
// then resumes by itself with GET + Last-Event-ID; see "drops" and "http" below)):
//   {"op":"listTools"|"listResources"|"listResourceTemplates"|"listPrompts", "cursor"?}
//   {"op":"callTool","name","arguments"?,"_meta"?}
//   {"op":"readResource"|"subscribeResource"|"unsubscribeResource","uri"}
//   {"op":"getPrompt","name","arguments"?}
//   {"op":"complete","ref","argument","context"?}
//   {"op":"ping"}  {"op":"setLoggingLevel","level"}
//   {"op":"request","method","params"?}        raw request, permissive result schema
//   {"op":"notify","method","params"?}         raw client notification
//   {"op":"setRoots","roots"}                  replace roots + send roots/list_changed
//   {"op":"sendRootsListChanged"}
//   {"op":"waitNotification","method","count"?=1,"timeout_ms"?}  waits until that many
//        notifications of that method have been received since connect
//   {"op":"sleep","ms"}
//
// Output: exactly one JSON document on stdout when the run ends:
//   {transport, serverInfo, protocolVersion, capabilities, instructions,
//    sessionId (http only), steps: [{op, id?, result} | {op, id?, error:{code,message,data?},
//    cancelled?}], notifications: [{method, params?}] (every server notification, raw),
//    progress: [{step, op, progress, total?, message?}], serverRequests: [{method, params?}],
//    errors: [transport/protocol errors], closedByServer, timedOut,
//    http (--http only): [{method, rpc?, sessionId?, lastEventId?, status?, fetchError?}]
//        every HTTP exchange in order: rpc = the JSON-RPC method POSTed ("response"
//        for a reply to a server request), sessionId/lastEventId = the Mcp-Session-Id
//        / Last-Event-ID request headers; the final terminateSession DELETE is listed,
//    drops (--http only): [{step, events, lastEventId}] one per drop_after_events cut,
//        lastEventId = the id of the last event delivered before the cut}
// Error "message" is the server's JSON-RPC message (the SDK's "MCP error N: " prefix
// is stripped); client-side failures have code null (or -32001 for timeouts/cancels).
// All logging goes to stderr. Exit codes: 0 connected (step errors are reported in
// the JSON, not fatal), 2 connection/usage failure (reason on stderr, nothing on
// stdout), 3 the overall --timeout expired after connecting (JSON is still printed,
// with "timedOut": true; steps after the interrupted one are not run or listed).

import { setMaxListeners } from 'node:events';
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
    CreateMessageRequestSchema,
    ElicitRequestSchema,
    ListRootsRequestSchema,
    ResultSchema
} from '@modelcontextprotocol/sdk/types.js';

// stdout carries only the final JSON document.
console.log = console.error;
console.info = console.error;
console.debug = console.error;

const EXIT_OK = 0;
const EXIT_CONNECT = 2;
const EXIT_TIMEOUT = 3;

function log(...args) {
    console.error('[ts-client]', ...args);
}

function usage(message) {
    process.stderr.write(`client.mjs: ${message}\n`);
    process.stderr.write('usage: node client.mjs [--script JSON|@file|-] [--timeout ms] [--elicit JSON] ' +
        '[--elicit-action accept|decline|cancel] [--sample TEXT] [--roots JSON] [--header "K: V"] ' +
        '(--stdio -- command [args...] | --http URL)\n');
    process.exit(EXIT_CONNECT);
}

function parseJsonOption(name, text) {
    try {
        return JSON.parse(text);
    } catch (e) {
        usage(`${name}: invalid JSON: ${e.message}`);
    }
}

function parseArgs(argv) {
    const opts = {
        mode: null,
        command: null,
        args: [],
        url: null,
        scriptText: '[]',
        timeout: 20000,
        elicit: undefined,
        elicitAction: 'accept',
        sample: undefined,
        roots: undefined,
        headers: {},
        clientName: 'mcphost-ts-test-client'
    };
    let i = 0;
    const next = name => {
        if (i + 1 >= argv.length) usage(`${name} needs a value`);
        i += 1;
        return argv[i];
    };
    for (; i < argv.length; i++) {
        const a = argv[i];
        switch (a) {
            case '--stdio':
                opts.mode = 'stdio';
                break;
            case '--http':
                opts.mode = 'http';
                opts.url = next(a);
                break;
            case '--':
                opts.command = argv[i + 1];
                opts.args = argv.slice(i + 2);
                i = argv.length;
                break;
            case '--script':
                opts.scriptText = next(a);
                break;
            case '--timeout':
                opts.timeout = Number(next(a));
                if (!Number.isFinite(opts.timeout) || opts.timeout <= 0) usage('--timeout must be a positive number');
                break;
            case '--elicit':
                opts.elicit = parseJsonOption(a, next(a));
                break;
            case '--elicit-action':
                opts.elicitAction = next(a);
                if (!['accept', 'decline', 'cancel'].includes(opts.elicitAction)) usage('bad --elicit-action');
                break;
            case '--sample':
                opts.sample = next(a);
                break;
            case '--roots':
                opts.roots = parseJsonOption(a, next(a));
                if (!Array.isArray(opts.roots)) usage('--roots must be a JSON array');
                break;
            case '--header': {
                const h = next(a);
                const idx = h.indexOf(':');
                if (idx <= 0) usage(`bad --header ${JSON.stringify(h)}`);
                opts.headers[h.slice(0, idx).trim()] = h.slice(idx + 1).trim();
                break;
            }
            case '--client-name':
                opts.clientName = next(a);
                break;
            default:
                usage(`unknown argument ${JSON.stringify(a)}`);
        }
    }
    if (opts.mode === 'stdio' && !opts.command) usage('--stdio needs -- <command> [args...]');
    if (opts.mode === 'http' && opts.command) usage('--http does not take a command');
    if (!opts.mode) usage('one of --stdio or --http is required');
    return opts;
}

function loadScript(text) {
    let raw = text;
    if (text === '-') raw = readFileSync(0, 'utf8');
    else if (text.startsWith('@')) raw = readFileSync(text.slice(1), 'utf8');
    const script = parseJsonOption('--script', raw);
    if (!Array.isArray(script)) usage('--script must be a JSON array of steps');
    for (const step of script) {
        if (!step || typeof step !== 'object' || typeof step.op !== 'string') {
            usage(`every step needs an "op": ${JSON.stringify(step)}`);
        }
    }
    return script;
}

// McpError prefixes messages with "MCP error <code>: "; report the wire message.
function errorInfo(e) {
    const code = typeof e?.code === 'number' ? e.code : null;
    let message = e instanceof Error ? e.message : String(e);
    const prefix = `MCP error ${code}: `;
    if (code !== null && message.startsWith(prefix)) message = message.slice(prefix.length);
    const out = { code, message };
    if (e?.data !== undefined) out.data = e.data;
    return out;
}

// AbortSignal.any needs Node >= 20.3; keep Node 18 working.
function anySignal(signals) {
    if (typeof AbortSignal.any === 'function') return AbortSignal.any(signals);
    const ctrl = new AbortController();
    for (const s of signals) {
        if (s.aborted) {
            ctrl.abort(s.reason);
            break;
        }
        s.addEventListener('abort', () => ctrl.abort(s.reason), { once: true });
    }
    return ctrl.signal;
}

function isNotification(m) {
    return m && typeof m === 'object' && typeof m.method === 'string' && !('id' in m);
}

function isRequest(m) {
    return m && typeof m === 'object' && typeof m.method === 'string' && 'id' in m;
}

// The SSE body `body`, ended after the `limit`-th event that carries data: what came
// before is delivered, then the stream closes (as if the server had closed it) and the
// real body is cancelled, which makes fetch close the connection. A graceful close,
// not an error: an errored stream would discard chunks its readers had not taken yet.
function cutAfterEvents(body, limit, onCut) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let buffer = '';
    let seen = 0;
    let lastId = null;
    let cut = false;
    return new ReadableStream({
        // Loops until it can enqueue something: a pull that enqueues nothing is not called again.
        async pull(controller) {
            while (!cut) {
                const { value, done } = await reader.read();
                if (done) {
                    buffer += decoder.decode();
                    if (buffer) controller.enqueue(encoder.encode(buffer));
                    controller.close();
                    return;
                }
                buffer += decoder.decode(value, { stream: true });
                let deliver = '';
                let end;
                while ((end = buffer.indexOf('\n\n')) >= 0) {
                    const block = buffer.slice(0, end + 2);
                    buffer = buffer.slice(end + 2);
                    deliver += block;
                    const lines = block.split('\n');
                    for (const line of lines) if (line.startsWith('id:')) lastId = line.slice(3).trim();
                    if (lines.some(line => line.startsWith('data:') && line.slice(5).trim() !== '')) seen += 1;
                    if (seen >= limit) {
                        cut = true;
                        break;
                    }
                }
                if (deliver) controller.enqueue(encoder.encode(deliver));
                if (cut) {
                    onCut(lastId);
                    controller.close();
                    await reader.cancel('dropped by the test harness').catch(() => {});
                    return;
                }
                if (deliver) return;
            }
        },
        cancel(reason) {
            return reader.cancel(reason);
        }
    }, { highWaterMark: 0 });
}

async function main() {
    const opts = parseArgs(process.argv.slice(2));
    const script = loadScript(opts.scriptText);
    const started = Date.now();
    const hardDeadline = started + opts.timeout;
    // Leave room for a clean shutdown (stdio close waits up to ~4s for the child).
    const closeReserve = Math.min(5000, Math.floor(opts.timeout / 4));
    const softDeadline = hardDeadline - closeReserve;
    const remaining = () => Math.max(1, softDeadline - Date.now());

    const out = {
        transport: opts.mode,
        serverInfo: null,
        protocolVersion: null,
        capabilities: null,
        instructions: null,
        steps: [],
        notifications: [],
        progress: [],
        serverRequests: [],
        errors: [],
        closedByServer: false,
        timedOut: false
    };
    if (opts.mode === 'http') {
        out.http = [];
        out.drops = [];
    }

    // ---- output / exit handling -------------------------------------------------
    let finished = false;
    const finish = (code, { printJson = true } = {}) => {
        if (finished) return;
        finished = true;
        const done = () => process.exit(code);
        if (printJson) process.stdout.write(JSON.stringify(out) + '\n', done);
        else done();
    };

    // ---- HTTP tracing and drop_after_events (--http only) ---------------------------
    // Armed by a step with "drop_after_events"; consumed by the next POST of a request.
    let pendingDrop = null;
    async function tracingFetch(url, init = {}) {
        const method = String(init.method ?? 'GET').toUpperCase();
        const headers = new Headers(init.headers ?? {});
        const entry = { method };
        let rpc = null;
        if (typeof init.body === 'string') {
            try {
                rpc = JSON.parse(init.body);
            } catch {
                rpc = null;
            }
        }
        if (rpc && typeof rpc === 'object' && !Array.isArray(rpc)) {
            entry.rpc = typeof rpc.method === 'string' ? rpc.method : 'response';
        }
        if (headers.get('mcp-session-id')) entry.sessionId = headers.get('mcp-session-id');
        if (headers.get('last-event-id')) entry.lastEventId = headers.get('last-event-id');
        out.http.push(entry);
        let response;
        try {
            response = await fetch(url, init);
        } catch (e) {
            entry.fetchError = errorInfo(e).message;
            throw e;
        }
        entry.status = response.status;
        const drop = pendingDrop;
        const isSse = (response.headers.get('content-type') ?? '').toLowerCase().startsWith('text/event-stream');
        if (drop && method === 'POST' && entry.rpc && entry.rpc !== 'response' && 'id' in rpc && isSse &&
            response.body) {
            pendingDrop = null;
            const body = cutAfterEvents(response.body, drop.events, lastEventId => {
                out.drops.push({ step: drop.step, events: drop.events, lastEventId });
                log(`dropped the SSE response of step ${drop.step} after ${drop.events} events (last id ${lastEventId})`);
            });
            return new Response(body, { status: response.status, statusText: response.statusText,
                headers: response.headers });
        }
        return response;
    }

    // ---- client -------------------------------------------------------------------
    const capabilities = {};
    if (opts.elicit !== undefined) capabilities.elicitation = {};
    if (opts.sample !== undefined) capabilities.sampling = {};
    if (opts.roots !== undefined) capabilities.roots = { listChanged: true };
    const client = new Client({ name: opts.clientName, version: '1.0.0' }, { capabilities });
    let roots = opts.roots;

    if (opts.elicit !== undefined) {
        client.setRequestHandler(ElicitRequestSchema, async () => {
            if (opts.elicitAction === 'accept') return { action: 'accept', content: opts.elicit };
            return { action: opts.elicitAction };
        });
    }
    if (opts.sample !== undefined) {
        client.setRequestHandler(CreateMessageRequestSchema, async () => ({
            role: 'assistant',
            content: { type: 'text', text: opts.sample },
            model: 'ts-test-model',
            stopReason: 'endTurn'
        }));
    }
    if (opts.roots !== undefined) {
        client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots }));
    }

    let closing = false;
    client.onclose = () => {
        if (!closing) {
            out.closedByServer = true;
            log('connection closed by server/transport');
        }
        notifyWaiters();
    };
    client.onerror = err => {
        const info = errorInfo(err);
        out.errors.push(info);
        log('transport error:', info.message);
    };

    // ---- transport ----------------------------------------------------------------
    let transport;
    if (opts.mode === 'stdio') {
        const env = {};
        for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
        transport = new StdioClientTransport({ command: opts.command, args: opts.args, env, stderr: 'inherit' });
    } else {
        let url;
        try {
            url = new URL(opts.url);
        } catch (e) {
            usage(`bad --http URL: ${e.message}`);
        }
        transport = new StreamableHTTPClientTransport(url, {
            requestInit: { headers: opts.headers },
            fetch: tracingFetch
        });
    }

    // Tap every incoming message before the Protocol layer sees it. Protocol.connect
    // chains a pre-existing transport.onmessage, so this is the supported hook.
    const waiters = new Set();
    function notifyWaiters() {
        for (const w of [...waiters]) w();
    }
    transport.onmessage = message => {
        if (isNotification(message)) {
            const n = { method: message.method };
            if (message.params !== undefined) n.params = message.params;
            out.notifications.push(n);
            notifyWaiters();
        } else if (isRequest(message)) {
            const r = { method: message.method };
            if (message.params !== undefined) r.params = message.params;
            out.serverRequests.push(r);
        } else if (message && message.result && out.protocolVersion === null &&
            typeof message.result.protocolVersion === 'string' && message.result.serverInfo) {
            out.protocolVersion = message.result.protocolVersion;
        }
    };

    // Track the stdio server process so we can wait for it to exit on close (the SDK's
    // own close escalates EOF -> SIGTERM -> SIGKILL, but may be cut short by our budget).
    let childPid = null;
    let childExited = Promise.resolve();
    const origStart = transport.start.bind(transport);
    transport.start = async () => {
        await origStart();
        if (opts.mode !== 'stdio') return;
        childPid = transport.pid ?? null;
        const proc = transport._process; // private in the SDK; used only to observe exit
        if (proc && typeof proc.once === 'function' && proc.exitCode === null && proc.signalCode === null) {
            childExited = new Promise(resolve => proc.once('exit', () => {
                childPid = null;
                resolve();
            }));
        } else if (proc) {
            childPid = null;
        }
    };

    const abort = new AbortController();
    // Every in-flight request listens on this signal; silence the leak heuristic.
    setMaxListeners(0, abort.signal);

    async function closeAll() {
        closing = true;
        const work = (async () => {
            if (opts.mode === 'http' && transport.sessionId) {
                try {
                    await transport.terminateSession();
                } catch (e) {
                    log('terminateSession failed:', errorInfo(e).message);
                }
            }
            try {
                await client.close();
            } catch (e) {
                log('close failed:', errorInfo(e).message);
            }
            await childExited;
        })();
        const budget = Math.max(500, hardDeadline - Date.now() - 100);
        let timer;
        const completed = await Promise.race([
            work.then(() => true),
            new Promise(r => { timer = setTimeout(() => r(false), budget); })
        ]);
        clearTimeout(timer);
        if (!completed) {
            log('clean close did not finish in time');
            killChild();
        }
    }

    // Last resort so a wedged stdio server does not outlive us.
    function killChild() {
        if (childPid === null) return;
        try {
            process.kill(childPid, 'SIGKILL');
            log(`killed stdio server pid ${childPid}`);
        } catch {
            // already gone
        }
    }

    // Overall watchdogs: soft deadline aborts the in-flight step; the hard deadline
    // prints whatever we have and exits no matter what.
    const softTimer = setTimeout(() => {
        out.timedOut = true;
        log(`overall timeout (${opts.timeout} ms) reached; aborting`);
        abort.abort(`overall timeout of ${opts.timeout} ms reached`);
        notifyWaiters();
    }, Math.max(1, softDeadline - Date.now()));
    const hardTimer = setTimeout(() => {
        out.timedOut = true;
        log('hard deadline reached; exiting without a clean close');
        killChild();
        finish(out.serverInfo ? EXIT_TIMEOUT : EXIT_CONNECT, { printJson: Boolean(out.serverInfo) });
    }, opts.timeout);

    // ---- connect --------------------------------------------------------------------
    try {
        await client.connect(transport, { timeout: remaining(), signal: abort.signal });
    } catch (e) {
        const info = errorInfo(e);
        process.stderr.write(`client.mjs: connection failed: ${info.message}${info.code !== null ? ` (code ${info.code})` : ''}\n`);
        if (e instanceof Error && e.stack) log(e.stack);
        await closeAll();
        clearTimeout(softTimer);
        finish(EXIT_CONNECT, { printJson: false });
        return;
    }
    if (opts.mode === 'http' && transport.protocolVersion && out.protocolVersion === null) {
        out.protocolVersion = transport.protocolVersion;
    }
    out.serverInfo = client.getServerVersion() ?? null;
    out.capabilities = client.getServerCapabilities() ?? null;
    out.instructions = client.getInstructions() ?? null;
    if (opts.mode === 'http') out.sessionId = transport.sessionId ?? null;
    log('connected to', JSON.stringify(out.serverInfo), 'protocol', out.protocolVersion);

    // ---- steps ----------------------------------------------------------------------
    const stepTimers = [];
    function requestOptions(step, index, entry) {
        const ro = {
            timeout: Math.min(remaining(), typeof step.timeout_ms === 'number' ? step.timeout_ms : Infinity),
            signal: abort.signal
        };
        if (step.progress) {
            ro.onprogress = p => out.progress.push({ step: index, op: step.op, ...p });
            ro.resetTimeoutOnProgress = false;
        }
        if (typeof step.cancel_after_ms === 'number') {
            // Cancel this request (SDK sends notifications/cancelled) after a delay.
            const ctrl = new AbortController();
            const t = setTimeout(() => {
                entry.cancelled = true;
                // The SDK sends notifications/cancelled with String(reason) and rejects
                // the request with McpError(-32001, reason).
                ctrl.abort(`cancelled after ${step.cancel_after_ms} ms`);
            }, step.cancel_after_ms);
            stepTimers.push(t);
            ro.signal = anySignal([abort.signal, ctrl.signal]);
        }
        return ro;
    }

    const sleep = ms => new Promise((resolve, reject) => {
        const onAbort = () => {
            clearTimeout(t);
            reject(abort.signal.reason);
        };
        const t = setTimeout(() => {
            abort.signal.removeEventListener('abort', onAbort);
            resolve();
        }, ms);
        abort.signal.addEventListener('abort', onAbort, { once: true });
    });

    function waitNotification(step) {
        const count = typeof step.count === 'number' ? step.count : 1;
        const matches = () => out.notifications.filter(n => n.method === step.method);
        return new Promise((resolve, reject) => {
            const limit = Math.min(remaining(), typeof step.timeout_ms === 'number' ? step.timeout_ms : Infinity);
            let timer;
            const check = () => {
                const m = matches();
                if (m.length >= count) {
                    cleanup();
                    resolve({ count: m.length, notifications: m });
                } else if (abort.signal.aborted) {
                    cleanup();
                    reject(abort.signal.reason);
                } else if (out.closedByServer) {
                    cleanup();
                    reject(new Error(`connection closed while waiting for ${step.method}`));
                }
            };
            const cleanup = () => {
                clearTimeout(timer);
                waiters.delete(check);
            };
            timer = setTimeout(() => {
                cleanup();
                reject(new Error(`timed out after ${limit} ms waiting for ${count} x ${step.method} (got ${matches().length})`));
            }, limit);
            waiters.add(check);
            check();
        });
    }

    const paged = step => (step.cursor !== undefined ? { cursor: step.cursor } : undefined);

    async function runStep(step, index, entry) {
        const ro = requestOptions(step, index, entry);
        switch (step.op) {
            case 'listTools':
                return client.listTools(paged(step), ro);
            case 'callTool': {
                const params = { name: step.name, arguments: step.arguments ?? {} };
                if (step._meta !== undefined) params._meta = step._meta;
                return client.callTool(params, undefined, ro);
            }
            case 'listResources':
                return client.listResources(paged(step), ro);
            case 'listResourceTemplates':
                return client.listResourceTemplates(paged(step), ro);
            case 'readResource':
                return client.readResource({ uri: step.uri }, ro);
            case 'subscribeResource':
                return client.subscribeResource({ uri: step.uri }, ro);
            case 'unsubscribeResource':
                return client.unsubscribeResource({ uri: step.uri }, ro);
            case 'listPrompts':
                return client.listPrompts(paged(step), ro);
            case 'getPrompt': {
                const params = { name: step.name };
                if (step.arguments !== undefined) params.arguments = step.arguments;
                return client.getPrompt(params, ro);
            }
            case 'complete': {
                const params = { ref: step.ref, argument: step.argument };
                if (step.context !== undefined) params.context = step.context;
                return client.complete(params, ro);
            }
            case 'ping':
                return client.ping(ro);
            case 'setLoggingLevel':
                return client.setLoggingLevel(step.level, ro);
            case 'request': {
                // Raw request with a permissive result schema (e.g. unknown methods).
                const req = { method: step.method };
                if (step.params !== undefined) req.params = step.params;
                return client.request(req, ResultSchema, ro);
            }
            case 'notify': {
                const n = { method: step.method };
                if (step.params !== undefined) n.params = step.params;
                await client.notification(n);
                return {};
            }
            case 'setRoots':
                if (roots === undefined) throw new Error('setRoots needs --roots (roots capability)');
                roots = step.roots;
                await client.sendRootsListChanged();
                return {};
            case 'sendRootsListChanged':
                await client.sendRootsListChanged();
                return {};
            case 'waitNotification':
                return waitNotification(step);
            case 'sleep':
                await sleep(step.ms ?? 0);
                return {};
            default:
                throw new Error(`unknown op ${JSON.stringify(step.op)}`);
        }
    }

    for (let i = 0; i < script.length; i++) {
        const step = script[i];
        const entry = { op: step.op };
        if (step.id !== undefined) entry.id = step.id;
        if (abort.signal.aborted) break;
        if (typeof step.drop_after_events === 'number') {
            if (opts.mode !== 'http') usage('drop_after_events needs --http');
            pendingDrop = { step: i, events: Math.max(1, Math.floor(step.drop_after_events)) };
        }
        try {
            entry.result = (await runStep(step, i, entry)) ?? null;
        } catch (e) {
            entry.error = errorInfo(e);
        } finally {
            while (stepTimers.length) clearTimeout(stepTimers.pop());
            pendingDrop = null;
        }
        out.steps.push(entry);
    }

    clearTimeout(softTimer);
    await closeAll();
    finish(out.timedOut ? EXIT_TIMEOUT : EXIT_OK);
}

process.on('unhandledRejection', reason => {
    console.error('[ts-client] unhandled rejection:', reason);
});

main().catch(e => {
    process.stderr.write(`client.mjs: fatal: ${e?.stack ?? e}\n`);
    process.exit(EXIT_CONNECT);
});
