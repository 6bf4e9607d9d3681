module github.com/airlock-gate/airlock/services/teams

go 1.26.0

require (
	github.com/airlock-gate/airlock/proto v0.0.0
	github.com/airlock-gate/airlock/services/shared v0.0.0
	github.com/airlock-gate/airlock/services/slack v0.0.0
	github.com/coreos/go-oidc/v3 v3.21.0
	github.com/go-jose/go-jose/v4 v4.1.4
	github.com/nats-io/nats.go v1.55.0
	golang.org/x/oauth2 v0.37.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/slack-go/slack v0.34.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace (
	github.com/airlock-gate/airlock/policies => ../../policies
	github.com/airlock-gate/airlock/proto => ../../proto
	github.com/airlock-gate/airlock/sdk => ../../sdk
	github.com/airlock-gate/airlock/services/shared => ../shared
	github.com/airlock-gate/airlock/services/slack => ../slack
)
