package subscription

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// sealedPrefix marks a secret sealed with Options.SecretKey; anything else is stored as given.
const sealedPrefix = "sealed:v1:"

// seal encrypts a webhook secret for the store when a key is configured. The subscription id is the additional
// data, so a sealed secret copied onto another row does not open.
func (s *Service) seal(id, secret string) (string, error) {
	if secret == "" || s.aead == nil {
		return secret, nil
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("subscription: unable to seal the secret: %w", err)
	}
	ct := s.aead.Seal(nonce, nonce, []byte(secret), []byte("subscription:"+id))
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(ct), nil
}

// open returns the plain secret of a stored one. Errors never include the secret.
func (s *Service) open(id, stored string) (string, error) {
	if !strings.HasPrefix(stored, sealedPrefix) {
		return stored, nil
	}
	if s.aead == nil {
		return "", errors.New("the secret is sealed but this process has no secret key (HALLEY_SECRET differs between replicas?)")
	}
	raw, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(stored, sealedPrefix))
	ns := s.aead.NonceSize()
	if err != nil || len(raw) < ns {
		return "", errors.New("the sealed secret is corrupt")
	}
	pt, err := s.aead.Open(nil, raw[:ns], raw[ns:], []byte("subscription:"+id))
	if err != nil {
		return "", errors.New("the sealed secret does not open with this process's key (HALLEY_SECRET changed?)")
	}
	return string(pt), nil
}
