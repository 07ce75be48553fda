package template

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/halley-bpm/halley/model"
)

// API trigger secrets (a start trigger's header_token and header_password) are write-only. They are stored as
// "hmac-sha256:<hex>", an HMAC keyed with a key derived from HALLEY_SECRET, so that a copy of the database (or of
// a template export) does not let anyone test guesses offline; and every answer shows "***" where one is set.
// Saving a definition with "***" keeps the secret the draft already holds. Definitions saved before keyed hashes
// hold "sha256:<hex>" (unkeyed): they keep working until the secret is set again.

// SecretMask is what answers show in place of a set trigger secret, and what a client sends to keep it.
const SecretMask = "***"

const (
	hmacPrefix   = "hmac-sha256:"
	legacyPrefix = "sha256:"
)

var secretFields = []string{"header_token", "header_password"}

func (s *Service) hashSecret(v string) string {
	m := hmac.New(sha256.New, s.secretKey)
	m.Write([]byte(v))
	return hmacPrefix + hex.EncodeToString(m.Sum(nil))
}

// SecretMatches reports in constant time whether a presented secret is the stored one (keyed hash, legacy hash,
// or plaintext from a definition older than hashing).
func (s *Service) SecretMatches(stored, presented string) bool {
	if stored == "" {
		return false
	}
	var want, got string
	switch {
	case strings.HasPrefix(stored, hmacPrefix):
		want, got = stored, s.hashSecret(presented)
	case strings.HasPrefix(stored, legacyPrefix):
		h := sha256.Sum256([]byte(presented))
		want, got = stored, legacyPrefix+hex.EncodeToString(h[:])
	default:
		// Compare hashes, so that the comparison's time does not depend on the secret's length.
		want, got = s.hashSecret(stored), s.hashSecret(presented)
	}
	return subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

// keepSecrets stores the trigger secrets of a definition being saved: a new value is hashed, "***" keeps the
// value prev (the draft being replaced) holds for the same start node. EINVALID secret_unknown when "***" stands
// for a secret that was never set.
func (s *Service) keepSecrets(def, prev []byte) ([]byte, error) {
	nodes := gjson.GetBytes(def, "nodes")
	if !nodes.IsArray() {
		return def, nil
	}
	for i, n := range nodes.Array() {
		if n.Get("type").Str != model.NodeStart {
			continue
		}
		for _, f := range secretFields {
			v := n.Get("trigger." + f)
			if v.Type != gjson.String || v.Str == "" || strings.HasPrefix(v.Str, hmacPrefix) || strings.HasPrefix(v.Str, legacyPrefix) {
				continue
			}
			stored := s.hashSecret(v.Str)
			if v.Str == SecretMask {
				if stored = previousSecret(prev, n.Get("id").Str, f); stored == "" {
					return nil, model.CodedError(model.EINVALID, "secret_unknown",
						"node %q: trigger.%s is %q, which keeps the secret already set, but none is: send the secret itself", n.Get("id").Str, f, SecretMask)
				}
			}
			out, err := sjson.SetBytes(def, fmt.Sprintf("nodes.%d.trigger.%s", i, f), stored)
			if err != nil {
				return nil, fmt.Errorf("template: unable to store trigger.%s: %w", f, err)
			}
			def = out
		}
	}
	return def, nil
}

// previousSecret finds the stored secret of field in prev: on the start node with the same id, else on its
// start node.
func previousSecret(prev []byte, id, field string) string {
	var byID, any string
	for _, n := range gjson.GetBytes(prev, "nodes").Array() {
		if n.Get("type").Str != model.NodeStart {
			continue
		}
		v := n.Get("trigger." + field).Str
		if n.Get("id").Str == id {
			byID = v
		}
		if any == "" {
			any = v
		}
	}
	if byID != "" {
		return byID
	}
	return any
}

// RedactSecrets replaces every set trigger secret of a definition with "***", as every answer shows it.
func RedactSecrets(def []byte) []byte {
	nodes := gjson.GetBytes(def, "nodes")
	if !nodes.IsArray() {
		return def
	}
	for i, n := range nodes.Array() {
		if n.Get("type").Str != model.NodeStart {
			continue
		}
		for _, f := range secretFields {
			if v := n.Get("trigger." + f); v.Type == gjson.String && v.Str != "" {
				if out, err := sjson.SetBytes(def, fmt.Sprintf("nodes.%d.trigger.%s", i, f), SecretMask); err == nil {
					def = out
				}
			}
		}
	}
	return def
}
