package server

// PageStyleSource is the CSP source that allows the server's pages' style element.
var PageStyleSource = pageStyleSource
