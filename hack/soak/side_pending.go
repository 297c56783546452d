package main

import (
	"context"
	"errors"
	"io"

	"github.com/authvault/authvault/hack/soak/wire"
)

func runSide(ctx context.Context, cfg wire.Config, out io.Writer) error {
	return errors.New("not yet")
}
