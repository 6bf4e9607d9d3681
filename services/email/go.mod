module github.com/airlock-gate/airlock/services/email

go 1.26.0

replace (
	github.com/airlock-gate/airlock/policies => ../../policies
	github.com/airlock-gate/airlock/proto => ../../proto
	github.com/airlock-gate/airlock/sdk => ../../sdk
	github.com/airlock-gate/airlock/services/shared => ../shared
)

require (
	github.com/airlock-gate/airlock/proto v0.0.0
	github.com/airlock-gate/airlock/services/shared v0.0.0-00010101000000-000000000000
	github.com/emersion/go-sasl v0.0.0-20241020182733-b788ff22d5a6
	github.com/emersion/go-smtp v0.25.1
	github.com/wneessen/go-mail v0.7.2
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/text v0.29.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
