package main

import "github.com/svat/partnerapi/internal/security/sealed"

// secretKey seals the webhook secrets of every server this run starts
// (PARTNER_SECRET_KEY, which a server on an external database needs): one
// key, so that each replica opens what another sealed.
var secretKey = sealed.NewKey()
