// Package wire is what replicas of quotaplane serve say to each other on the
// peer listener (docs/replicas.md): the messages a follower sends the
// leading replica's engine, and its answers, as explicit types owned by
// this package alone. The engine's and the quota model's own types may
// change freely; what crosses between replicas changes only here, and only
// with a new Version.
//
// # Format
//
// Every call is an HTTPS POST (TLS 1.3, both sides holding a certificate of
// the peer CA) to one path under /quotaplane/peer/v1/ — decide/create,
// decide/update, decide/budget, review, undo, ended, refusal — with a JSON
// body (Content-Type: application/json) of the path's request type and the
// header Quotaplane-Peer-Version naming the message version it is written
// in. The answer is 200 with a JSON Response in the same version, or:
//
//   - 400 with an Error of kind UnsupportedVersion when the receiver does not
//     speak the request's version; the header Quotaplane-Peer-Versions lists
//     the versions it does speak. The sender treats it as "no leader can
//     decide this now": its own client is answered "retry" (a 504), never a
//     decision decoded wrong.
//   - 400 for a body that is not the path's request, 403 for a caller
//     without a peer certificate, 404 for an unknown path, 405 for a method
//     other than POST.
//
// # Versions
//
// A replica speaks its own version and the one before it (Speaks), so that
// replicas are upgraded one at a time with forwarding working throughout. A
// sender writes in its own version; refused as UnsupportedVersion, it writes
// the call again once in the highest version both speak, if there is one.
// The receiver answers in the version it was asked in.
//
//   - Version 1 (issues 35 to 52): the same JSON as version 2, sent without
//     the header; a request without the header is version 1.
//   - Version 2: the types of this package, with the header. Field names are
//     version 1's, so the bodies are the same; what changed is that they are
//     pinned here (testdata/v2 holds one of each message, and the test fails
//     when an encoding changes without a new version).
//
// A change that alters what a message means or how it is encoded adds a
// Version, keeps decoding the one before, and adds its example messages
// under testdata.
package wire
