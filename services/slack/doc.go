// Package slack is airlock's Slack integration: a notifier that posts a
// Block Kit card for each pending call routed to Slack and redraws it with
// the outcome, and the handler of Slack's interactivity request URL
// (POST /slack/interactions) that turns verified button clicks and modal
// submissions into decisions sent to the approval service.
//
// Slack is a front-end only: it never decides anything itself. It maps the
// Slack user to an airlock principal (slack.users) and the approval service
// alone authorizes. State shared between replicas (interactions already
// received, cards already posted) lives in the buckets.slack_seen KV bucket.
package slack
