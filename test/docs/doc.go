// Package docs runs the command blocks of quotaplane's documentation as
// written, so that what a reader pastes works.
//
// Every fenced block carries an info string (sh, console, yaml, text, …).
// A command block — sh, bash, shell or console — has a marker on the line
// before its opening fence:
//
//	<!-- run -->                          run it
//	<!-- run: background, ready: TEXT --> start it, go on once its output holds TEXT
//	<!-- skip: REASON -->                 do not run it, for this reason
//
// The test fails on a fence without an info string, on a command block
// without a marker, and on any run block that fails. A document's blocks run
// in order with bash (set -euo pipefail), like commands pasted into one
// terminal: `cd` and exported variables carry over from one block to the
// next. Each document starts in a fresh temporary directory that is also
// HOME, with the quotaplane binary built from this module and kubectl on
// PATH. A background block (a server) runs beside the blocks after it and is
// stopped when its document ends; the ports it listens on are checked free
// before it starts. A console block runs its "$ " lines.
package docs
