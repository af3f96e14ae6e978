package servertest

import (
	"fmt"
	"os"
	"strings"
)

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
