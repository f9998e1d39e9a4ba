package main

// release is this release's number (semantic versioning; the API stays
// v1 whatever it is): `partnerapi version` prints it, CHANGELOG.md names
// it, and the database records it beside the function files this binary
// applies, so that the previous release, started again on the database
// during a rolling upgrade or a rollback, leaves this one's functions in
// place (db.Config.Release). A release is cut by moving CHANGELOG.md's
// "Unreleased" under this number and PREVIOUS_RELEASE to the release
// before it (CONTRIBUTING.md, "Releases").
const release = "1.4.0"
