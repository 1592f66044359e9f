// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package engine is the OPA engine behind every fsbroker decision: it loads a policy set,
// compiles and type-checks it, tests it, decides, and hot-reloads it.
//
// A policy set (package fsbroker.authz) defines data.fsbroker.authz.decision, an object
// {allow, code, reasons, obligations}, and may define data.fsbroker.authz.visible, the set of
// input.entries[_].mountPath that a listing or a watch event may show, and
// data.fsbroker.authz.consentable, those a files/consent may grant. Its input is the document
// of schema/policy-input.json. [New] loads a [Source] (a directory, an fs.FS such as the
// embedded defaults, or a bundle file, signed or not) together with the library
// (policies.Library: the helper rules of package fsbroker.lib, and package fsbroker.derived),
// each package of it unless the source defines that package itself; compiles it in strict mode
// with the input typed by that schema (so input.path.canonicl is a compile error naming file and
// line), runs the set's *_test.rego tests, and prepares the three queries once. For a set that
// does not define visible or consentable, the query is data.fsbroker.derived's, which derives
// them from the decision: an entry is visible when a read of it is allowed, a path consentable
// when the access asked is allowed with a grant of it added. The prepared queries are
// shared by every goroutine; [Engine.Watch] replaces the whole set atomically when its files
// change, and only after the new set compiled and passed its tests. Every failure to load is a
// [*LoadError] with the file and line of each problem.
//
// The engine never fails open: [Engine.Decide] answers a denial with code PERMISSION_DENIED
// when no policy is loaded, when evaluation fails (built-in errors are fatal), and when the
// decision is undefined or malformed, and returns the error for the caller to log;
// [Engine.Visible] then shows nothing. Policies cannot reach the network (http.send and remote
// schema references are refused). [Test] and [Check] serve `fsbroker policy test` and
// `fsbroker policy check`; [Engine.Explain] serves `fsbroker eval`.
//
// # v1/rego or v1/sdk
//
// Decisions go through prepared v1/rego queries, not through OPA's v1/sdk. Chosen by
// BenchmarkDecide (bench_test.go), which runs both in the same process on the same map input,
// each returning a checked Decision; the SDK loads the same policy set as a bundle file
// (file:// resource). On the project's 2-core machines (AMD EPYC, Go 1.26.8, OPA v1.22.2, load
// about 1.5, two runs; thread CPU time is within 2% of wall time at the p50):
//
//	policy, input                      v1/rego p50 / p99      v1/sdk p50 / p99     allocs rego / sdk
//	trivial (allow := true)              6.9 us / 31 us         36 us / 360 us            92 / 502
//	realistic, 20 grants                 133 us / 750 us        164 us / 830 us          885 / 989
//	realistic, 2 grants                   87 us / 580 us        108 us / 615 us          525 / 629
//	default set (policies.FS), 20 grants 261 us / 1.4 ms        280 us / 1.3 ms         1354 / 1424
//	default set, 2 grants                146 us / 950 us        175 us / 1.1 ms          718 / 788
//	visible, 1,000 entries, trivial      6.1 ms / 11 ms         -
//	visible, 1,000 entries, realistic     13 ms / 25 ms         -
//	visible, 1,000 entries, default       23 ms / 39 ms         -
//
// The prepared query is 5x faster on the trivial policy and 7-20% faster on the others, with
// fewer allocations: the SDK adds a store transaction and bundle lookup, provenance, metrics and
// an eager conversion of the whole input to every decision. It also keeps what this package
// needs in reach: the compiler (strict mode, the input schema, the tests run against the very
// set that is swapped in), strict built-in errors, and one atomic swap of everything a decision
// uses. What the SDK would add, bundles from a bundle service and decision-log upload, is a
// follow-up (OPA's bundle downloader and bundle package work without the SDK).
//
// The engine's own share is small: a map input (tests) is converted whole; JSON input (the
// broker's batches, fsbroker eval) is parsed straight
// into AST values in one pass (parseJSONObject: no intermediate map[string]any, terms allocated
// in slabs, strings without escapes sliced from one copy of the document, the input schema's
// property names shared), which is 2.5x faster than OPA's decoding and conversion and agrees
// with it on every document (a differential fuzz test). The broker's decision input
// ([Decider.Decide]) goes without JSON: its per-session part (server, session, front end,
// grants) is converted to AST values once per change and kept by session, and only the
// request's own part is built per decision, the same value the JSON would parse to (a test and
// a fuzz target hold it to that); the decision cache's key is that part's generation and the
// request's own part. Results stay AST values (no conversion to Go maps), and
// the strings kept from them are copied off the input. Metrics are off, and cancellation uses
// context.AfterFunc instead of the goroutine OPA otherwise starts per evaluation. A one-line
// policy decides in 4.6 us, against 4.9 us for a bare PreparedEvalQuery.Eval of it.
//
// The decision budget (p50 <= 15 us, p99 <= 60 us) is met by the engine with a policy that
// evaluates a few rules, not by the realistic benchmark policy nor by the default set: OPA's
// evaluator spends about 0.7-1 us per expression evaluated on these machines, and an allowed
// read evaluates 57 expressions of the default set, each rule already reduced to what its
// semantics need. BenchmarkDecideFirstTouch measures the broker's decision stage on paths never
// decided before: about 56 us p50 with 2 or 20 grants (was 108 us with 20), of which building
// the input, the cache's key and reading the decision take about 6 us, OPA's fixed cost per
// evaluation 3 us and OPA evaluating the checks the rest. Leaving out one check at a time saves
// 12.2 us (confinement), 9.3 us (secrets) and 8 us (the covering grant) (docs/performance.md,
// "After issue 21, and the budget"). The set's data documents are held as AST values, not
// converted again on every read. Each evaluation gets its rule cache (OPA's virtual cache)
// from a pool instead of a new tree of maps (virtualcache.go), and a decision's cache starts
// with the set's constant rules, computed once at load (seeds.go): rules that read no input,
// nothing that does, have no with and call no nondeterministic built-in (one that fails, reads
// one that fails, or is not computed within 2 s is computed in each evaluation). The p99 is
// mostly the shared machine's: without any garbage collection it is about a sixth lower.
//
// [Engine.DecideCached] meets it for repeated requests: a set whose decisions depend only on
// its input and data (checked at load: no nondeterministic or clock-reading built-in, no read of
// the input as a whole or by a computed key) keeps up to 4,096 decisions by a caller's key (the
// broker's is the input without its time), dropped with the set on reload; when a rule reads
// input.time a decision is reused for at most a second. A hit takes about 0.1 us.
//
// [Engine.Visible] and [Engine.Consentable] keep their results the same way, for a JSON input:
// a batch is decided as a whole (a rule may look at every entry), so the key is the whole input
// without its top-level time member, as a SHA-256 with the length hashed; at most 256 results
// and about 4 MiB per set. A repeated 1,000-entry listing page then costs a scan and a hash of
// its input (about 0.4 ms) instead of an evaluation (about 13 ms). The broker's own batches
// ([Decider.Visible], Consentable, Carried) are built as OPA values without JSON, with facts
// for the hide rules on each entry (batchinput.go), and keyed on a SHA-256 of their fields; a
// first 1,000-entry listing page costs about 6 ms with the default set.
//
// The derived visible and consentable decide each entry on its own (with input as ...): a
// 1,000-entry batch costs about 15 us per entry plus the decision, 16 ms with an allow-all
// decision, 72 ms with a few rules calling the helpers, 93 ms with the default set's decision,
// against 11 ms for the default set's own visible (BenchmarkDerived1000, thread CPU p50). The
// default set keeps its own rules, and the library changes nothing of its cost: 67 us per
// decision and 11 ms per 1,000-entry visibility batch before and after (thread CPU p50, median
// of five interleaved runs), 494 allocations per decision instead of 489.
//
// A set loaded without its tests (WithRunTests(false), as fsbroker loads the embedded default
// set, whose tests run in its own test suite) does not parse its test files either: that was
// 40% of the load.
package engine
