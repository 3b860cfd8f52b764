package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// templateImage is the trainstep image a template's container names, tag and digest.
var templateImage = regexp.MustCompile(`(?m)^\s+image: (ghcr\.io/trainstep/trainstep:\S+)$`)

// ShippedImage reads the trainstep image templates/workflowtemplate.yaml names below the
// repository root, by tag and digest (`make image-pin` writes it; a test of docs/ holds every
// shipped reference to the same one). Tests that run the shipped files replace it whole.
func ShippedImage(root string) (string, error) {
	path := filepath.Join(root, "templates", "workflowtemplate.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	m := templateImage.FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("%s names no ghcr.io/trainstep/trainstep image", path)
	}
	return string(m[1]), nil
}
