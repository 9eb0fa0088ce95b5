// Package webui serves the e1kbox dashboard, its JSON API, the live WebSocket stream and Prometheus metrics.
//
// The package imports nothing from the appliance: it defines the small
// interfaces it reads and changes the box through (Stats, ConfigStore,
// Rules, Conntrack, FDB, Tuning, System) and the supervisor hands it
// implementations. Any of them may be nil (no NAT in bridge mode, no FDB in
// NAT mode, ...): the matching pages and endpoints then report that the
// feature is not available.
//
// Everything except the WebSocket handshake requires HTTP Basic
// authentication as user "gokrazy" with the box's gokrazy password. Requests
// that change state must carry the X-E1kbox-CSRF header and must not come
// from another origin. The API and the message schema of the stream are
// documented in docs/api.md.
package webui
