package plugins_test

import (
	"bytes"
	"testing"

	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/templates/plugins"
)

func TestAll(t *testing.T) {
	all, err := plugins.All()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]plugins.File{}
	for _, f := range all {
		if err := plugin.ValidName(f.Name); err != nil {
			t.Errorf("%s: %v", f.File, err)
		}
		if err := plugin.Runtime(f.Runtime).Validate(); err != nil {
			t.Errorf("%s: %v", f.File, err)
		}
		byName[f.Name] = f
	}
	cc, ok := byName["create-cache"]
	if !ok {
		t.Fatalf("create-cache missing from %v", all)
	}
	if !bytes.Contains(cc.Source, []byte("import halley_plugin")) || !bytes.Contains(cc.Source, []byte(`"status": "created"`)) {
		t.Errorf("create-cache source looks wrong:\n%s", cc.Source)
	}
}
