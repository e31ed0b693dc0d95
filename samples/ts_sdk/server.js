// MCP server built from the official TypeScript SDK (@modelcontextprotocol/sdk), for the
// sse-forensics sample captures: `node server.js PORT`.
//
// One StreamableHTTPServerTransport (stateful: sessionIdGenerator) and one McpServer per
// session, all sharing the SDK's example InMemoryEventStore (event IDs
// `<streamId>_<Date.now()>_<random>`), so every SSE event carries an ID and a dropped
// stream can be resumed with Last-Event-ID. The tool `long_task` sends STEPS progress
// notifications STEP_MS apart through the request's `sendNotification`, then returns.
// Prints "listening <port>" on stdout once it accepts connections.
//
// `node server.js PORT LOGDIR [DROP]`: the server also writes its access and event logs in
// LOGDIR through log-middleware.js; DROP (progress values, comma-separated) makes that
// middleware shed those progress notifications and announce them with a stream-gap.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';

import { logMiddleware } from './log-middleware.js';

const STEPS = 8;
const STEP_MS = 100;
// `retry:` (ms) in the priming events: the delay the SDK client waits before reconnecting.
const RETRY_MS = 100;

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

function buildServer() {
    const server = new McpServer({ name: 'sse-forensics-ts-sample', version: '1.0.0' });
    server.registerTool(
        'long_task',
        { description: `Report ${STEPS} progress notifications, then return.` },
        async extra => {
            const progressToken = extra._meta?.progressToken;
            for (let step = 1; step <= STEPS; step++) {
                if (progressToken !== undefined) {
                    await extra.sendNotification({
                        method: 'notifications/progress',
                        params: { progressToken, progress: step, total: STEPS, message: `step ${step}` }
                    });
                }
                await sleep(STEP_MS);
            }
            return { content: [{ type: 'text', text: `done after ${STEPS} steps` }] };
        }
    );
    return server;
}

const eventStore = new InMemoryEventStore();
const transports = new Map(); // mcp-session-id -> transport

async function readJson(req) {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const text = Buffer.concat(chunks).toString('utf8');
    return text ? JSON.parse(text) : undefined;
}

function jsonError(res, status, message) {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

async function handle(req, res) {
    if (new URL(req.url, 'http://localhost').pathname !== '/mcp') {
        return jsonError(res, 404, 'Not found');
    }
    const sessionId = req.headers['mcp-session-id'];
    const body = req.method === 'POST' ? await readJson(req) : undefined;
    let transport = sessionId === undefined ? undefined : transports.get(sessionId);
    if (transport === undefined) {
        if (sessionId !== undefined || req.method !== 'POST' || !isInitializeRequest(body)) {
            return jsonError(res, sessionId === undefined ? 400 : 404, 'No valid session');
        }
        // A new session: the SDK's recommended stateful set-up (server per session).
        transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            eventStore,
            retryInterval: RETRY_MS,
            onsessioninitialized: id => transports.set(id, transport)
        });
        transport.onclose = () => {
            if (transport.sessionId) transports.delete(transport.sessionId);
        };
        await buildServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
}

const [, , portArg, logDir, dropArg] = process.argv;
const tap = logDir ? logMiddleware(logDir, { drop: (dropArg ?? '').split(',').filter(Boolean).map(Number) }) : null;

const httpServer = createServer((req, res) => {
    tap?.(req, res);
    handle(req, res).catch(error => {
        console.error('request failed:', error);
        if (!res.headersSent) jsonError(res, 500, 'Internal error');
    });
});

const port = Number(portArg);
httpServer.listen(port, '127.0.0.1', () => {
    console.log(`listening ${port}`);
});

function shutdown() {
    for (const transport of transports.values()) transport.close();
    httpServer.close(() => process.exit(0));
    httpServer.closeAllConnections();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
