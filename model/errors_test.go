package model_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/halley-bpm/halley/model"
)

// A domain error wrapping a sentinel is told apart by errors.Is, also when wrapped again, and keeps its kind.
func TestErrorWrapsASentinel(t *testing.T) {
	err := fmt.Errorf("store: %w", model.Errorf(model.ENOTFOUND, "instance %q not found", "i1").Wrapping(model.ErrNoInstance))
	if !errors.Is(err, model.ErrNoInstance) || !model.IsKind(err, model.ENOTFOUND) {
		t.Fatalf("%v: Is %v, kind %s", err, errors.Is(err, model.ErrNoInstance), model.ErrorKind(err))
	}
	if plain := model.Errorf(model.ENOTFOUND, "task %q not found", "t1"); errors.Is(plain, model.ErrNoInstance) {
		t.Fatal("a not-found without the sentinel is ErrNoInstance")
	}
}
