package crashtest

import (
	"os"
	"testing"

	"github.com/usherhq/usher/internal/testbin"
)

func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
