// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package consent holds the consent providers: what answers a server's
// files/consent request (PROTOCOL.md section 5) and what the --consent flag
// chooses (section 7): auto, deny, prompt, elicit, console or command:PROG.
//
// A Provider gets a Request (who asks, the server's message, the paths, read
// or write) and returns a Decision: the subset of the requested paths that
// was approved, and the provider's name for the audit trail. An error means
// nothing was approved; the caller fails closed and logs it (errors may name
// host paths and programs, so they are for the operator's log, not for the
// server). The caller has already canonicalized the paths and confirmed them
// inside the roots; providers never widen a request (a provider can only
// approve paths that were asked for, exactly as asked) and do not store
// grants: that is the caller's job.
//
// Parse turns a --consent value into a Provider; Default is the provider used
// when the flag is absent (prompt where the process has a controlling
// terminal, else deny). Options: WithTimeout (default 60 s, DefaultTimeout)
// bounds one question of prompt and command; WithEnv sets a command's
// environment.
//
// # auto and deny
//
// auto approves every requested path, leaving the decision to policy; deny
// approves none.
//
// # prompt
//
// prompt asks the person at the controlling terminal. It opens /dev/tty and
// never touches stdin or stdout, which carry the protocol. It shows:
//
//   - the server: when the operator pinned its identity, the pinned id and
//     what the server declares; otherwise the declared name and version,
//     marked UNVERIFIED, since any program can claim any name;
//   - the access asked for (read, or write: read, create, change, delete);
//   - each path, numbered, with its root's display name and directory when
//     the caller gave them, and a reminder that a grant covers everything
//     beneath the path;
//   - the requested paths that are not asked about (Request.Removed: outside
//     every root, or never grantable by the policy), each with why, escaped
//     and cut;
//   - the server's message, sanitized (below), each line prefixed "  | ".
//
// While the question is on the terminal, the HeldOutput given with
// WithHeldOutput (the broker's log) is held: what is written to it comes out
// once the question ends, so no log line lands in the middle of it.
//
// It then discards keys typed before the question (so typed-ahead input
// cannot answer it) and reads a line: "a" approves all, "n" or an empty line
// none, "s" asks about each path in turn ("y" approves it; "n" or an empty
// line does not). Anything else asks again. The answer is line-based: the
// terminal's mode is never changed, so nothing needs restoring if the broker
// dies mid-question.
//
// One prompt at a time uses the terminal in a process, whatever the number of
// Prompt values; the others wait their turn, and the wait counts against
// their time limit. The limit is the earlier of the context's deadline and
// the provider's timeout: when it passes, the terminal says so and nothing is
// approved. A process without a controlling terminal gets ErrNoTerminal
// (wrapped) and nothing approved. On Windows the prompt is not available:
// NewPrompt and Parse("prompt") fail, and Default is deny.
//
// # elicit
//
// elicit asks the person through the MCP host's own UI: the transport that
// faces the host (fsbroker wrap) puts an Elicitor in the request's context
// (WithElicitor), and the provider has it send the host elicitation/create in
// form mode. The form's message is what the prompt shows (the server, marked
// UNVERIFIED unless pinned; the access; the paths with their roots; the paths
// not asked about; the server's message, sanitized and cut); its fields are
// one boolean per path ("path1-T", "path2-T", ..., T a random token fresh
// for each question, so an answer to any other form the host shows names no
// field of the question), false by default, titled with the path. Only the paths set to true in an accepted form are approved; a
// decline or a cancel approves nothing. Without an Elicitor, or when the host
// cannot show a form (no elicitation capability, or a protocol revision
// without elicitation), Ask fails with ErrNoElicitation and nothing is
// approved: the caller logs it. The time limit (WithTimeout) ends the
// question, and the host is told it is cancelled.
//
// # console
//
// console asks the person at fsbroker console (PROTOCOL.md section 11), a
// process of its own that serves a web page and may serve every broker
// process of a state directory. NewConsole takes the state directory; the
// channel is its Queue, the directory <state-dir>/consent:
//
//	request-<id>.json   a question, written by the waiting broker (QueuedRequest)
//	answer-<id>.json    its answer: the approved paths, written by the console
//
// id is 128 random bits in hex, fresh for each question. Each file is
// created once, complete, and never replaced (internal/atomicfile's Create:
// a temporary file linked to its name), so no reader sees it half written
// and whoever creates the answer first decides: the console's Answer fails
// with ErrAnswered when an answer exists. The broker looks for its answer
// every 100 ms; at its time limit (WithTimeout, DefaultTimeout) it
// withdraws the question by writing an answer itself (withdrawn: nothing
// approved), unless the person's answer came first, which then stands. It
// removes both files once it has its decision. So a console that is not
// running, or nobody at it, means the time limit, then nothing approved,
// and an answer to a question that is no longer waiting (never asked,
// withdrawn, or already decided) fails (ErrNoRequest, ErrAnswered). The
// console watches the directory (fsnotify, Queue.Watch) and shows each
// request as it arrives; Pending lists those still waiting, Sweep removes
// what a broker killed while waiting left.
//
// Nothing but the directory's permissions keeps another process from
// writing a request or an answer there: OpenQueue (and the provider, at
// start and while it waits) refuses a state directory that group or others
// may write, and a queue directory that is not a directory of this user's
// with mode 0700 or narrower, and an answer file that is not a regular
// file of this user's. A process of the same user can write there, as it
// can write the grants themselves. A request file someone else wrote shows
// on the page, but its answer reaches no broker (nobody waits on its id),
// and grants are only ever stored by the broker that asked.
//
// # command:PROG
//
// "command:PROG ARGS..." runs an operator-chosen program for each request.
// The text after "command:" is split into words at blanks; '...' quotes
// literally, "..." quotes with \" and \\ as its only escapes, and outside
// quotes a backslash takes the next character literally. No shell runs and
// nothing is expanded: "command:/opt/ask --title 'File access'" runs
// /opt/ask with the arguments --title and "File access". PROG is found in PATH
// when it has no slash and is resolved to an absolute path by Parse, so a
// missing program is a configuration error at start-up.
//
// The program gets one JSON object and a newline on stdin:
//
//	{
//	  "version": 1,
//	  "server": {"id": "notes", "name": "notes", "version": "1.2.0", "pinned": false},
//	  "message": "I need your notes to build the index.",
//	  "paths": ["proj/notes", "proj/todo.md"],
//	  "access": "read",
//	  "roots": [{"mount": "proj", "name": "Project", "path": "/home/ann/proj", "writable": false}],
//	  "removed": [{"path": "proj/.env", "reason": "secrets: path matches the protected name pattern \".env\""}]
//	}
//
// version is 1 for this layout (new members may be added within it);
// server.id is the identity grants are kept under, and server.name and
// server.version are what the server declared (trustworthy only when
// server.pinned is true); message is the server's text, as sent (untrusted);
// paths are mount-relative, canonical, in the roots, and without repeats;
// access is "read" or "write"; roots (possibly empty) describes the roots of
// the paths; removed (possibly empty) are the requested paths left out, and
// why, for display only.
//
// The program answers on stdout, with exit status 0, in the shape of the
// files/consent result (PROTOCOL.md section 5):
//
//	{"approvedPaths": ["proj/notes"], "granted": true}
//
// approvedPaths must be an array of strings; [] approves nothing; granted
// may be left out, and false approves nothing whatever the array holds;
// other members are ignored. A bare array of paths (["proj/notes"]) is
// accepted too. A listed path approves only when it is one of the requested
// paths, byte for byte; anything else (a parent, a path not asked for) is
// dropped. Nothing is approved, and Ask returns a *CommandError saying why,
// when the program exits non-zero or by a signal, writes anything but that
// one answer (white space aside), writes more than 1 MiB, cannot be started,
// or has not finished within the timeout (default 60 s). On timeout or
// cancellation the program's whole process group is killed (SIGKILL): the
// program is started as the leader of its own group, so a dialog or script it
// starts goes with it unless it leaves the group itself (setsid). Being in
// its own group also means the program is not in the terminal's foreground
// group: reading the terminal would stop it, so use prompt for terminal
// questions. Stdout and stderr are closed a second after the program exits
// even if something it started holds them open. The first 512 bytes of stderr,
// control characters removed, goes into the error for the log. On Windows
// there are no process groups: a timeout kills only the program.
//
// The program gets the broker's environment (WithEnv replaces it) and working
// directory: desktop dialogs need DISPLAY, WAYLAND_DISPLAY,
// DBUS_SESSION_BUS_ADDRESS and the like, and the program is the operator's
// own choice, as trusted as the broker. Several sessions may run it at once;
// a program that must ask one question at a time has to see to that itself.
//
// # Security
//
// Everything a server says is untrusted: its declared name and version, and
// its message, may be made up to mislead the person who decides. The prompt
// therefore marks an unpinned name as UNVERIFIED; shows names and versions
// quoted with anything not plainly visible escaped; strips from the message
// every escape sequence (CSI, OSC, DCS and the others, in ESC and C1 form),
// every other control character, and Unicode format characters such as
// bidirectional overrides, so a hostile message can neither repaint or
// retitle the terminal, nor hide or reorder text, nor pass for fsbroker's own
// lines (each is prefixed); and cuts it to 20 lines and 1000 characters.
// Paths holding characters that are not plainly visible are shown quoted and
// escaped. A command gets the message unchanged: it must treat it as
// untrusted text too (never pass it to a shell, and escape it for markup:
// zenity and notify-send, for example, read Pango markup).
package consent
