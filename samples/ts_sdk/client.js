// MCP client built from the official TypeScript SDK, for the sse-forensics sample captures:
// `node client.js URL clean|resume`.
//
// initialize, tools/call long_task (progress token and onresumptiontoken), tools/list,
// DELETE. In `resume` mode the client drops the tools/call stream as soon as progress 3
// arrives (transport.close() aborts its fetches), waits RESUME_AFTER_MS while the server
// stores what it cannot deliver, then reconnects to the same session with a new transport
// and resumes with the SDK's own path: `request(..., { resumptionToken })`, which sends
// GET + `last-event-id: <ID of progress 3>` and reads the replay and the live tail.
//
// Prints one JSON object on stdout: `progress`, the progress values the SDK delivered, and
// `events`, the tools/call data events (progress notifications, then the result) with their
// SSE IDs as the client read them off its responses.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { EventSourceParserStream } from 'eventsource-parser/stream';

const INTERRUPT_AT = 3; // resume mode: drop the stream once this progress value arrived
const RESUME_AFTER_MS = 150; // the server stores progress 4 meanwhile: the replay carries it

const [url, mode] = process.argv.slice(2);
if (!url || !['clean', 'resume'].includes(mode)) {
    console.error('usage: node client.js URL clean|resume');
    process.exit(2);
}
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

const saw = { progress: [], events: [], resumedWith: null, resultText: null };

/** Record the tools/call data events of every event stream the transport receives: the
 * body is teed and parsed by the same SSE parser the SDK uses. (The transport's
 * `onresumptiontoken` cannot serve: the SDK does not pass it to a resumed stream.) */
async function recordingFetch(input, init) {
    const response = await fetch(input, init);
    if (!response.body || !response.headers.get('content-type')?.startsWith('text/event-stream')) {
        return response;
    }
    const [forSdk, forRecord] = response.body.tee();
    void (async () => {
        const events = forRecord.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
        try {
            for await (const event of events) {
                const message = event.data ? JSON.parse(event.data) : {};
                if (message.method === 'notifications/progress') {
                    saw.events.push({ id: event.id ?? null, progress: message.params.progress });
                } else if (message.result?.content !== undefined) {
                    saw.events.push({ id: event.id ?? null, result: message.id });
                }
            }
        } catch {
            // the fetch was aborted (resume mode): the SDK's branch ends the same way
        }
    })();
    return new Response(forSdk, response);
}

const client = new Client({ name: 'sse-forensics-ts-client', version: '1.0.0' });
let interrupted = false;
client.onerror = error => {
    const text = String(error);
    // Expected once the stream is dropped: the aborted reads. And a request resumed with a
    // resumptionToken gets a new local request ID, so the Client finds no handler for the
    // progress token (the original request's ID) of replayed notifications.
    if (interrupted && (text.includes('AbortError') || text.includes('unknown token'))) return;
    console.error('client error:', error);
};

const first = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
await client.connect(first);

const call = { name: 'long_task', arguments: {} };
let lastEventId; // the latest SSE `id:` of the tools/call stream (its priming event included)
const options = {
    onresumptiontoken: token => {
        lastEventId = token;
    },
    onprogress: progress => {
        saw.progress.push(progress.progress);
        if (mode === 'resume' && !interrupted && progress.progress === INTERRUPT_AT) {
            interrupted = true;
            void first.close(); // aborts the POST's response stream (and the GET stream)
        }
    }
};

let result;
let transport = first;
try {
    result = await client.callTool(call, CallToolResultSchema, options);
} catch (error) {
    if (!interrupted) throw error;
    await sleep(RESUME_AFTER_MS);
    // Same session, new transport: Client.connect skips initialize when the session is set.
    transport = new StreamableHTTPClientTransport(new URL(url), {
        sessionId: first.sessionId,
        fetch: recordingFetch
    });
    transport.setProtocolVersion(first.protocolVersion);
    await client.connect(transport);
    saw.resumedWith = lastEventId;
    // The replayed progress carries the first request's token, which the Client no longer
    // routes to `onprogress` (see client.onerror): count it from the transport instead.
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
        if (message.method === 'notifications/progress') saw.progress.push(message.params.progress);
        deliver?.(message, extra);
    };
    result = await client.request({ method: 'tools/call', params: call }, CallToolResultSchema, {
        resumptionToken: lastEventId
    });
}
saw.resultText = result.content[0]?.text ?? null;

await client.listTools();
await transport.terminateSession(); // DELETE
await client.close();
console.log(JSON.stringify(saw));
