package main

import "github.com/authvault/authvault/hack/soak/side"

// runSide is a side's run: the side package's.
var runSide = side.Run
