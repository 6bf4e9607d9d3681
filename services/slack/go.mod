module github.com/airlock-gate/airlock/services/slack

go 1.26.0

require (
	github.com/airlock-gate/airlock/proto v0.0.0
	github.com/airlock-gate/airlock/services/shared v0.0.0
)

replace (
	github.com/airlock-gate/airlock/proto => ../../proto
	github.com/airlock-gate/airlock/services/shared => ../shared
)
