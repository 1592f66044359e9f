// An MCP host written with the official TypeScript SDK
// (@modelcontextprotocol/sdk), for fsbroker's interoperability test of
// fsbroker serve (cmd/fsbroker/serve_interop_ts_test.go). It uses only the
// SDK's public API: a Client with the roots capability (and, when asked,
// the elicitation capability) over the SDK's StdioClientTransport.
//
// It reads one JSON object from the file named by its argument: command (the
// server's command line, a JSON array), roots (what its roots/list handler
// answers), calls (requests, {method, params}, in order), and optionally
// name (its clientInfo.name; fsbroker-interop-ts-host when absent) and
// elicit ("accept" or "decline": it declares elicitation in form mode, and
// its handler for elicitation/create accepts with every boolean field of
// the form true, or declines). It starts the server, lists its tools (from
// which the SDK keeps the output schemas that callTool checks
// structuredContent against), sends each request with the SDK's own call for
// its method, and prints one JSON object to stdout: serverVersion, tools,
// replies ({result} or {error: {code, message}} for each request, in order),
// rootsListed (how many roots/list requests its handler answered) and
// elicitations (how many elicitation/create requests it answered).

import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema, ListRootsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const [command, ...args] = spec.command;

const capabilities = { roots: { listChanged: true } };
if (spec.elicit) {
	capabilities.elicitation = { form: {} };
}
const client = new Client({ name: spec.name ?? 'fsbroker-interop-ts-host', version: '1.0.0' }, { capabilities });
let rootsListed = 0;
client.setRequestHandler(ListRootsRequestSchema, async () => {
	rootsListed++;
	return { roots: spec.roots };
});
let elicitations = 0;
if (spec.elicit) {
	client.setRequestHandler(ElicitRequestSchema, async request => {
		elicitations++;
		if (spec.elicit !== 'accept') {
			return { action: 'decline' };
		}
		const content = {};
		for (const [name, field] of Object.entries(request.params.requestedSchema?.properties ?? {})) {
			if (field.type === 'boolean') {
				content[name] = true;
			}
		}
		return { action: 'accept', content };
	});
}

// The SDK's call for each method a request may have.
const calls = {
	'tools/call': params => client.callTool(params),
	'resources/list': params => client.listResources(params),
	'resources/templates/list': params => client.listResourceTemplates(params),
	'resources/read': params => client.readResource(params),
	'resources/subscribe': params => client.subscribeResource(params),
};

const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
await client.connect(transport);
const { tools } = await client.listTools();
const replies = [];
for (const { method, params } of spec.calls) {
	const call = calls[method];
	if (!call) {
		throw new Error(`no TypeScript SDK call for ${method}`);
	}
	try {
		replies.push({ result: await call(params) });
	} catch (e) {
		if (!(e instanceof McpError)) {
			throw e;
		}
		replies.push({ error: { code: e.code, message: e.message } });
	}
}
process.stdout.write(JSON.stringify({
	serverVersion: client.getServerVersion(),
	tools,
	replies,
	rootsListed,
	elicitations,
}) + '\n');
await client.close();
