// An MCP server written with the official TypeScript SDK
// (@modelcontextprotocol/sdk), for fsbroker's interoperability test
// (cmd/fsbroker/interop_ts_test.go). It speaks MCP on stdin and stdout
// through the SDK's StdioServerTransport and uses only the SDK's public API.
//
// Roots: once initialized, and again on each
// notifications/roots/list_changed, it lists its client's roots with the
// SDK's listRoots() (only when the client declared the roots capability, as
// a well-behaved server does). The tool "roots" reports what it saw.
//
// Tools:
//   roots     the last roots listed, how many list_changed notifications
//             arrived, how many listings were made, and the client's roots
//             capability
//   echo      {text}: the text back, as content and structured content, with
//             a logging notification first
//   progress  {steps}: one notifications/progress per step (when the request
//             carries a progressToken), then a summary
//   wait      {label}: one progress notification, then waits until the request
//             is cancelled (notifications/cancelled); the SDK then sends no
//             reply. The cancellation is recorded for "status"
//   status    the cancellations seen so far
//   sample    {prompt}: asks the client sampling/createMessage and returns the
//             answer's text
//   read      {path}: sends the client a raw files/read request (the
//             filesystem-brokering extension, not part of the SDK) and
//             returns the result as JSON text
//   consent   {paths}: sends the client a raw files/consent request for read
//             access to paths and returns the result as JSON text
//
// It logs what happens to stderr, one line each, prefixed "ts-server:".

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { RootsListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';

const log = (...args) => console.error('ts-server:', ...args);

const mcp = new McpServer(
	{ name: 'fsbroker-interop-ts-server', version: '1.0.0' },
	{ capabilities: { logging: {} }, instructions: 'A test server for fsbroker.' }
);

// What the server has learnt about its roots.
const state = {
	roots: null, // the last roots/list result's roots; null before the first
	listings: 0, // successful listRoots() calls
	listChanged: 0, // notifications/roots/list_changed received
	error: null, // the last listRoots() failure, as text
	cancelled: [] // {requestId, reason} of each cancelled "wait"
};

// Serialize listings, so that the last result recorded is the newest.
let listing = Promise.resolve();

function refreshRoots(why) {
	listing = listing.then(async () => {
		if (!mcp.server.getClientCapabilities()?.roots) {
			state.error = 'the client did not declare the roots capability';
			log(`${why}: not listing roots: ${state.error}`);
			return;
		}
		try {
			const { roots } = await mcp.server.listRoots();
			state.roots = roots;
			state.listings++;
			state.error = null;
			log(`${why}: ${roots.length} roots: ${roots.map(r => `${r.uri} (${r.name})`).join(', ')}`);
		} catch (err) {
			state.error = String(err?.message ?? err);
			log(`${why}: listRoots failed: ${state.error}`);
		}
	});
	return listing;
}

mcp.server.oninitialized = () => {
	log('initialized');
	void refreshRoots('initialized');
};

mcp.server.setNotificationHandler(RootsListChangedNotificationSchema, async () => {
	state.listChanged++;
	log(`roots list_changed #${state.listChanged}`);
	await refreshRoots('list_changed');
});

const text = s => ({ content: [{ type: 'text', text: s }] });

mcp.registerTool(
	'roots',
	{ description: 'The roots the server last listed, and how many list_changed notifications it got' },
	// It does not wait for a listing under way (one that fsbroker may hold
	// while it asks the host for its roots): callers poll.
	async () =>
		text(
			JSON.stringify({
				roots: state.roots,
				listings: state.listings,
				listChanged: state.listChanged,
				error: state.error,
				rootsCapability: mcp.server.getClientCapabilities()?.roots ?? null
			})
		)
);

mcp.registerTool(
	'echo',
	{
		description: 'Returns its text',
		inputSchema: { text: z.string() },
		outputSchema: { text: z.string(), length: z.number() }
	},
	async ({ text: s }, extra) => {
		await mcp.server.sendLoggingMessage({ level: 'info', logger: 'echo', data: `echoing ${s.length} characters` }, extra.sessionId);
		return { ...text(s), structuredContent: { text: s, length: s.length } };
	}
);

mcp.registerTool(
	'progress',
	{ description: 'Reports progress steps times, then returns', inputSchema: { steps: z.number().int().min(1).max(100) } },
	async ({ steps }, extra) => {
		const token = extra._meta?.progressToken;
		for (let i = 1; i <= steps; i++) {
			if (extra.signal.aborted) {
				break;
			}
			if (token !== undefined) {
				await extra.sendNotification({
					method: 'notifications/progress',
					params: { progressToken: token, progress: i, total: steps, message: `step ${i} of ${steps}` }
				});
			}
		}
		return text(`done: ${steps} steps`);
	}
);

mcp.registerTool(
	'wait',
	{ description: 'Reports progress once, then waits until the request is cancelled', inputSchema: { label: z.string() } },
	async ({ label }, extra) => {
		const token = extra._meta?.progressToken;
		if (token !== undefined) {
			await extra.sendNotification({
				method: 'notifications/progress',
				params: { progressToken: token, progress: 0, message: `waiting: ${label}` }
			});
		}
		// Wait for the cancellation; a bound keeps a forgotten request from
		// holding the process forever.
		const outcome = await new Promise(resolve => {
			const timer = setTimeout(() => resolve('timeout'), 60_000);
			const onAbort = () => {
				clearTimeout(timer);
				resolve('cancelled');
			};
			if (extra.signal.aborted) {
				onAbort();
			} else {
				extra.signal.addEventListener('abort', onAbort, { once: true });
			}
		});
		if (outcome === 'cancelled') {
			const reason = extra.signal.reason === undefined ? null : String(extra.signal.reason);
			state.cancelled.push({ requestId: extra.requestId, label, reason });
			log(`wait ${JSON.stringify(label)} cancelled (request ${JSON.stringify(extra.requestId)}): ${reason}`);
		}
		return text(`wait ${label}: ${outcome}`);
	}
);

mcp.registerTool('status', { description: 'The cancellations seen so far' }, async () =>
	text(JSON.stringify({ cancelled: state.cancelled }))
);

mcp.registerTool(
	'sample',
	{ description: "Asks the client's model", inputSchema: { prompt: z.string() } },
	async ({ prompt }) => {
		const res = await mcp.server.createMessage({
			messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
			maxTokens: 16
		});
		return text(`model ${res.model} said: ${res.content.type === 'text' ? res.content.text : res.content.type}`);
	}
);

// files/read is not in the SDK: the request goes out raw, and its result is
// checked loosely.
const FilesReadResultSchema = z.looseObject({ content: z.string() });

mcp.registerTool(
	'read',
	{ description: 'Reads a file through the client (files/read)', inputSchema: { path: z.string() } },
	async ({ path }) => {
		try {
			const res = await mcp.server.request({ method: 'files/read', params: { path } }, FilesReadResultSchema);
			return text(JSON.stringify(res));
		} catch (err) {
			return { ...text(`files/read failed: ${err?.message ?? err}`), isError: true };
		}
	}
);

// files/consent is not in the SDK either.
const FilesConsentResultSchema = z.looseObject({ granted: z.boolean(), approvedPaths: z.array(z.string()) });

mcp.registerTool(
	'consent',
	{ description: 'Asks the client for read access to paths (files/consent)', inputSchema: { paths: z.array(z.string()) } },
	async ({ paths }) => {
		try {
			const res = await mcp.server.request(
				{ method: 'files/consent', params: { message: 'The TypeScript server would like to read these.', requestedPaths: paths } },
				FilesConsentResultSchema,
				{ timeout: 120_000 }
			);
			return text(JSON.stringify(res));
		} catch (err) {
			return { ...text(`files/consent failed: ${err?.message ?? err}`), isError: true };
		}
	}
);

const transport = new StdioServerTransport();
process.stdin.on('end', async () => {
	log('end of input');
	await mcp.close();
	process.exit(0);
});
await mcp.connect(transport);
log(`running on node ${process.version}`);
