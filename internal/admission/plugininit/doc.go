// Package plugininit owns what quotaplane's own admission plugins are given
// by the API server's plugin initializer (the dynamic client, and the
// authorizer for those that ask), the initializer serve adds for the plugins
// that read objects stored in control planes (NewPlanesInitializer: clients
// of the planes with the server's loopback credentials), and the check, when the admission chain is
// built, that they were given it. A plugin embeds DynamicClient or
// DynamicAndAuthorizer instead of writing its own Set* and
// ValidateInitialization methods.
//
// It only holds what it is given; it never reads through it and never admits.
package plugininit
