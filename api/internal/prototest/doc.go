// Package prototest checks the generated protobuf code of an API package:
// every kind registered round-trips through Marshal/Unmarshal and through
// the protobuf serializer of a codec factory, and no field escapes the
// check. Only the API packages' tests use it.
package prototest
