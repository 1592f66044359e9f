// An MCP host written with the official TypeScript SDK
// (@modelcontextprotocol/sdk), for fsbroker's interoperability test of
// --consent elicit (cmd/fsbroker/interop_ts_test.go). It uses only the SDK's
// public API: a Client with the elicitation capability (form mode) over the
// SDK's StdioClientTransport, which starts the command in the environment
// variable FSBROKER_TEST_HOST_CMD (a JSON array: fsbroker wrap ... -- the
// TypeScript server).
//
// Its elicitation handler answers every form field whose title names a path
// in FSBROKER_TEST_APPROVE (a JSON array) with true, the others with false,
// and declines a form with no such field. It then calls the server's tools:
// consent (for every path in FSBROKER_TEST_ASK), then read (each path), and
// prints one JSON object to stdout: the elicitations it got (their params)
// and each tool's text.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [command, ...args] = JSON.parse(process.env.FSBROKER_TEST_HOST_CMD);
const approve = JSON.parse(process.env.FSBROKER_TEST_APPROVE);
const ask = JSON.parse(process.env.FSBROKER_TEST_ASK);

const client = new Client(
	{ name: 'fsbroker-interop-ts-host', version: '1.0.0' },
	{ capabilities: { elicitation: { form: {} } } }
);
const elicitations = [];
client.setRequestHandler(ElicitRequestSchema, async request => {
	elicitations.push(request.params);
	const content = {};
	let any = false;
	for (const [name, field] of Object.entries(request.params.requestedSchema?.properties ?? {})) {
		const yes = approve.some(p => String(field.title ?? '').includes(p));
		content[name] = yes;
		any = any || yes;
	}
	return any ? { action: 'accept', content } : { action: 'decline' };
});

const transport = new StdioClientTransport({ command, args, stderr: 'inherit' });
await client.connect(transport);
const textOf = res => res.content?.[0]?.text ?? '';
const consent = textOf(await client.callTool({ name: 'consent', arguments: { paths: ask } }, undefined, { timeout: 120_000 }));
const reads = {};
for (const path of ask) {
	reads[path] = textOf(await client.callTool({ name: 'read', arguments: { path } }));
}
process.stdout.write(JSON.stringify({ elicitations, consent, reads }) + "\n");
await client.close();
