// Package teams is airlock's Microsoft Teams integration: a Bot Framework
// bot that posts an Adaptive Card for each pending call routed to Teams
// (through the Bot Connector REST API) and redraws it with the outcome, and
// the handler of the bot's messaging endpoint (POST /teams/messages) that
// turns verified card actions into decisions sent to the approval service.
//
// Teams is a front-end only: it never decides anything itself. Every
// inbound activity carries a token the Bot Framework signed; it is checked
// (keys from the Bot Framework's OpenID metadata, issuer, audience = the
// bot's app id, expiry, the serviceUrl claim) before anything in the
// activity is read. The Teams user is mapped to an airlock principal
// (teams.users) and the approval service alone authorizes. State shared
// between replicas (activities already received, cards already posted)
// lives in the buckets.teams_seen KV bucket.
package teams
