package bus

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// EnsureConsumer creates or updates the durable consumer cc on stream.
// A cluster that has just formed, is busy placing another replica's
// identical request, or has too few of the stream's peers up can leave a
// request unanswered or refused for a while (an executor replica's start
// failed on "context deadline exceeded" under `airlock chaos`): such
// answers are tried again, as provisioning tries them, until ctx ends.
// retrying, when not nil, is told of the first.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, cc jetstream.ConsumerConfig, retrying func(error)) (jetstream.Consumer, error) {
	var cons jetstream.Consumer
	err := untilAnswered(ctx, func(actx context.Context) error {
		var err error
		cons, err = js.CreateOrUpdateConsumer(actx, stream, cc)
		return err
	}, func(err error) bool { return clusterNotReady(err) || peersDown(err) }, retrying)
	return cons, err
}

// peersDown reports a consumer a replicated stream cannot place because
// too few of its peers are up (nats-server's JSInsufficientResourcesErr,
// with two of three nodes down); their return changes it.
func peersDown(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrInsufficientResources
}

// jsErrInsufficientResources is nats-server's JSInsufficientResourcesErr.
const jsErrInsufficientResources jetstream.ErrorCode = 10023
