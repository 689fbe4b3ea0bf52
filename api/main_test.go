package api_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/metanode/metanode/internal/browsertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(browsertest.M{M: m}) }
