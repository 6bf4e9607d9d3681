module github.com/airlock-gate/airlock/policies

go 1.26.0
