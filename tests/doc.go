// Package tests holds airlock's end-to-end, fault and browser tests. They
// start the real pieces: the airlock binary, embedded NATS, ClickHouse,
// Chromium and npm MCP servers.
package tests
