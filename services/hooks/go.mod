module github.com/airlock-gate/airlock/services/hooks

go 1.26.0
