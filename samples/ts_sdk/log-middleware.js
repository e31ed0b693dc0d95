// Logging middleware for a node:http server in front of the official MCP TypeScript SDK
// transport, for the sse-forensics log samples: `tap(req, res)` before the SDK handles a
// request. It writes what such a deployment leaves (docs/logs.md):
//
// - access.log, nginx's `combined-mcp` format: combined + "$http_last_event_id"
//   "$sent_http_mcp_session_id" $request_time, one line when the response ends;
// - events.jsonl, the event log, from the event stream it passes on: `emitted` for every SSE
//   event the SDK wrote, `written` for each one handed to the socket, named after the SDK's
//   stream (the `<streamId>_` prefix of its IDs), the exchange and the resume's
//   Last-Event-ID. With `drop` (progress values) it sheds those progress notifications
//   (`evicted`) and, before the next event, writes a `stream-gap` naming their IDs: logged
//   as the event written (`written` named `stream-gap`), the only record of the signal.

import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

const now = () => (performance.timeOrigin + performance.now()) / 1000;
const pad = (n, width = 2) => String(n).padStart(width, '0');

function timeLocal(seconds) {
    const d = new Date(seconds * 1000);
    return `${pad(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:` +
        `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} +0000`;
}

// nginx escape=default: "-" for no value, '"', '\' and bytes outside printable ASCII as \xHH.
function nginxValue(value) {
    if (value === undefined || value === null || value === '') return '-';
    let out = '';
    for (const byte of Buffer.from(String(value))) {
        const printable = byte >= 0x20 && byte < 0x7f && byte !== 0x22 && byte !== 0x5c;
        out += printable ? String.fromCharCode(byte) : `\\x${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    }
    return out;
}

function parseEvent(block) {
    const fields = {};
    for (const line of block.split(/\r?\n/)) {
        if (!line || line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const name = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        (fields[name] ??= []).push(value);
    }
    if (!fields.id && !fields.data) return null;
    return {
        id: fields.id?.at(-1) ?? null,
        event: fields.event?.at(-1) ?? 'message',
        data: (fields.data ?? []).join('\n'),
    };
}

const streamOf = id => (id ? id.split('_')[0] : null);

function progressOf(data) {
    try {
        const message = JSON.parse(data);
        return message.method === 'notifications/progress' ? message.params.progress : null;
    } catch {
        return null;
    }
}

export function logMiddleware(dir, { drop = [] } = {}) {
    mkdirSync(dir, { recursive: true });
    const accessPath = join(dir, 'access.log');
    const eventsPath = join(dir, 'events.jsonl');
    writeFileSync(accessPath, '');
    writeFileSync(eventsPath, '');
    const shed = new Set(drop);
    let exchanges = 0;
    const log = record => appendFileSync(eventsPath, JSON.stringify({ ts: Number(now().toFixed(6)), ...record }) + '\n');

    return function tap(req, res) {
        const exchange = `x${pad(++exchanges, 4)}`;
        const started = now();
        const lastEventId = req.headers['last-event-id'];
        let session = req.headers['mcp-session-id'] ?? null;
        let sse = false;
        let buffer = '';
        let bytes = 0;
        let dropped = []; // shed IDs not yet announced

        const writeHead = res.writeHead.bind(res);
        res.writeHead = (status, ...rest) => {
            const headers = rest.find(h => h && typeof h === 'object') ?? {};
            for (const [name, value] of Object.entries(headers)) {
                if (name.toLowerCase() === 'mcp-session-id') session ??= String(value);
                if (name.toLowerCase() === 'content-type' && String(value).startsWith('text/event-stream')) sse = true;
            }
            return writeHead(status, ...rest);
        };
        const write = res.write.bind(res);
        const send = text => {
            bytes += Buffer.byteLength(text);
            return write(text);
        };
        const about = id => ({ session, stream: streamOf(id), request: exchange, ...(lastEventId ? { last_event_id: lastEventId } : {}) });
        res.write = (chunk, ...rest) => {
            const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
            if (!sse) return send(text);
            buffer += text;
            const blocks = buffer.split(/\r?\n\r?\n/);
            buffer = blocks.pop();
            let ok = true;
            for (const block of blocks) {
                const event = parseEvent(block);
                if (event === null) {
                    ok = send(`${block}\n\n`) && ok;
                    continue;
                }
                log({ ...about(event.id), event_id: event.id, kind: 'emitted', event: { data: event.data } });
                if (shed.has(progressOf(event.data))) {
                    log({ ...about(event.id), event_id: event.id, kind: 'evicted', reason: 'shed by the proxy', where: 'live-queue' });
                    dropped.push(event.id);
                    continue;
                }
                if (dropped.length) {
                    const gap = { first: dropped[0], last: dropped.at(-1) };
                    const data = JSON.stringify(gap);
                    ok = send(`event: stream-gap\ndata: ${data}\n\n`) && ok;
                    log({ ...about(dropped[0]), event_id: null, kind: 'written', event: { type: 'stream-gap', data } });
                    dropped = [];
                }
                ok = send(`${block}\n\n`) && ok;
                log({ ...about(event.id), event_id: event.id, kind: 'written', event: { type: event.event, data: event.data } });
            }
            return ok;
        };
        const end = res.end.bind(res);
        res.end = (chunk, ...rest) => {
            if (chunk !== undefined && typeof chunk !== 'function') {
                res.write(chunk);
                return end(...rest);
            }
            return end(chunk, ...rest);
        };
        res.on('close', () => {
            const ended = now();
            const sent = session ?? res.getHeader('mcp-session-id');
            const request = `${req.method} ${req.url} HTTP/${req.httpVersion}`;
            const status = res.headersSent ? res.statusCode : 499;
            const quoted = [req.headers.referer, req.headers['user-agent'], lastEventId, sent].map(v => `"${nginxValue(v)}"`);
            const line = `${req.socket.remoteAddress ?? '-'} - - [${timeLocal(ended)}] "${nginxValue(request)}" ` +
                `${status} ${bytes} ${quoted.join(' ')} ${(ended - started).toFixed(3)}\n`;
            appendFileSync(accessPath, line);
        });
    };
}
