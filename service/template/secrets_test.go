package template

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/model"
)

func TestTriggerSecrets(t *testing.T) {
	s := New(nil, Options{SecretKey: []byte("key-one")})
	other := New(nil, Options{SecretKey: []byte("key-two")})
	def := []byte(`{"nodes":[{"id":"s","type":"start","trigger":{"kind":"sync-api","header_token":"tok-1","header_password":""}},{"id":"e","type":"end","header_token":"not a trigger"}]}`)

	stored, err := s.keepSecrets(def, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := gjson.GetBytes(stored, "nodes.0.trigger.header_token").Str
	if !strings.HasPrefix(h, "hmac-sha256:") || strings.Contains(string(stored), "tok-1") {
		t.Fatalf("stored %s", stored)
	}
	if gjson.GetBytes(stored, "nodes.0.trigger.header_password").Str != "" || gjson.GetBytes(stored, "nodes.1.header_token").Str != "not a trigger" {
		t.Fatalf("touched what is not a set secret: %s", stored)
	}
	// Keyed: the same secret under another key is another hash, and only the right key matches it.
	if h2, _ := other.keepSecrets(def, nil); gjson.GetBytes(h2, "nodes.0.trigger.header_token").Str == h {
		t.Fatal("the hash does not depend on the key")
	}
	if !s.SecretMatches(h, "tok-1") || s.SecretMatches(h, "tok-2") || other.SecretMatches(h, "tok-1") || s.SecretMatches("", "") {
		t.Fatal("SecretMatches is wrong for keyed hashes")
	}
	// Older definitions: unkeyed sha256 and plaintext still verify.
	legacy := sha256.Sum256([]byte("old"))
	if !s.SecretMatches("sha256:"+hex.EncodeToString(legacy[:]), "old") || s.SecretMatches("sha256:"+hex.EncodeToString(legacy[:]), "new") {
		t.Fatal("legacy sha256 secrets no longer verify")
	}
	if !s.SecretMatches("plain", "plain") || s.SecretMatches("plain", "plain2") {
		t.Fatal("plaintext secrets no longer verify")
	}

	// Answers show "***"; saving "***" keeps the stored value, by start node id or the only start node.
	shown := RedactSecrets(stored)
	if gjson.GetBytes(shown, "nodes.0.trigger.header_token").Str != SecretMask || strings.Contains(string(shown), "hmac") {
		t.Fatalf("redacted %s", shown)
	}
	again, err := s.keepSecrets(shown, stored)
	if err != nil || gjson.GetBytes(again, "nodes.0.trigger.header_token").Str != h {
		t.Fatalf("*** did not keep the secret: %s %v", again, err)
	}
	renamed := []byte(strings.Replace(string(shown), `"id":"s"`, `"id":"begin"`, 1))
	if again, err = s.keepSecrets(renamed, stored); err != nil || gjson.GetBytes(again, "nodes.0.trigger.header_token").Str != h {
		t.Fatalf("*** on a renamed start node: %s %v", again, err)
	}
	if _, err := s.keepSecrets(shown, nil); err == nil || !strings.Contains(err.Error(), "secret_unknown") {
		t.Fatalf("*** without a stored secret: %v", err)
	}
}

// TestSecretsAreWriteOnlyInTheSchema: the fields kept as keyed hashes and shown as "***" are exactly those the
// definition schema (GET /api/v1/schemas/definition.json) marks writeOnly, so that a client generated from the
// schema never expects to read one back.
func TestSecretsAreWriteOnlyInTheSchema(t *testing.T) {
	var writeOnly []string
	gjson.Get(model.DefinitionSchema, `$defs.Trigger.properties`).ForEach(func(k, v gjson.Result) bool {
		if v.Get("writeOnly").Bool() {
			writeOnly = append(writeOnly, k.Str)
		}
		return true
	})
	if !slices.Equal(writeOnly, secretFields) {
		t.Errorf("writeOnly trigger fields %v, secret fields %v", writeOnly, secretFields)
	}
}
