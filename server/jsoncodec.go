package server

import (
	"encoding/json"
	"io"

	ginjson "github.com/gin-gonic/gin/codec/json"
	gojson "github.com/goccy/go-json"
)

// responseJSON is the codec gin writes response bodies with (c.JSON): goccy/go-json, which writes the same bytes
// as encoding/json — HTML characters escaped, json.RawMessage compacted, the same MarshalJSON and omitempty rules;
// only a float below 1e-6 reads 1e-07, not 1e-7 (TestResponseJSONWritesWhatEncodingJSONWrites) — at about twice its speed (the store encodes instance states with it for the same reason). Encoding a response was
// 5 % of Halley's CPU in a steps profile (docs/benchmarks.md). Request bodies are not decoded through gin
// (bindJSON uses encoding/json's decoder with its limits), so decoding stays encoding/json here too.
type responseJSON struct{}

var _ ginjson.Core = responseJSON{}

func (responseJSON) Marshal(v any) ([]byte, error) { return gojson.Marshal(v) }

func (responseJSON) MarshalIndent(v any, prefix, indent string) ([]byte, error) {
	return gojson.MarshalIndent(v, prefix, indent)
}

func (responseJSON) NewEncoder(w io.Writer) ginjson.Encoder { return gojson.NewEncoder(w) }

func (responseJSON) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

func (responseJSON) NewDecoder(r io.Reader) ginjson.Decoder { return json.NewDecoder(r) }
