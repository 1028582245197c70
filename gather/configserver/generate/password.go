// Package generate makes the credentials CredHub generates — passwords,
// users, certificates, RSA and SSH keys — with Go's crypto and CredHub's
// rules and defaults (components/credentials/…/generators in
// cloudfoundry/credhub). Key generation, the costly part, runs at most
// GOMAXPROCS at once, so concurrent requests use every core without
// oversubscribing them.
package generate

import (
	"crypto/rand"
	"errors"
	"math/big"
)

// Character sets of CredHub's password rules (Passay's English data and
// CredHubCharacterData.SPECIAL).
const (
	lower   = "abcdefghijklmnopqrstuvwxyz"
	upper   = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digits  = "0123456789"
	special = "!#$%&()*,-./:;<=>?@[\\]^_`{|}~"
)

// Password lengths CredHub accepts; others fall back to the default.
const (
	DefaultLength = 30
	minLength     = 4
	maxLength     = 200
)

// PasswordParams are CredHub's StringGenerationParameters.
type PasswordParams struct {
	Length         int  `json:"length,omitempty"`
	ExcludeUpper   bool `json:"exclude_upper,omitempty"`
	ExcludeLower   bool `json:"exclude_lower,omitempty"`
	ExcludeNumber  bool `json:"exclude_number,omitempty"`
	IncludeSpecial bool `json:"include_special,omitempty"`
}

// ErrExcludesAll is a parameter set that leaves no character to choose.
var ErrExcludesAll = errors.New("excludes all character sets")

// Normalized has the length CredHub uses, so stored parameters compare equal
// however the request spelled the default.
func (p PasswordParams) Normalized() PasswordParams {
	if p.Length < minLength || p.Length > maxLength {
		p.Length = DefaultLength
	}
	return p
}

// Validate reports CredHub's EXCLUDES_ALL_CHARSETS case.
func (p PasswordParams) Validate() error {
	if !p.IncludeSpecial && p.ExcludeNumber && p.ExcludeUpper && p.ExcludeLower {
		return ErrExcludesAll
	}
	return nil
}

// Password generates a password as Passay does for CredHub: every allowed
// character set contributes at least one character.
func Password(p PasswordParams) (string, error) {
	if err := p.Validate(); err != nil {
		return "", err
	}
	p = p.Normalized()
	var sets []string
	if p.IncludeSpecial {
		sets = append(sets, special)
	}
	if !p.ExcludeNumber {
		sets = append(sets, digits)
	}
	if !p.ExcludeUpper {
		sets = append(sets, upper)
	}
	if !p.ExcludeLower {
		sets = append(sets, lower)
	}
	all := ""
	for _, s := range sets {
		all += s
	}
	out := make([]byte, p.Length)
	for i := range out {
		// The first characters come one from each set, the rest from all;
		// the shuffle below hides which were which.
		from := all
		if i < len(sets) {
			from = sets[i]
		}
		c, err := pick(from)
		if err != nil {
			return "", err
		}
		out[i] = c
	}
	for i := len(out) - 1; i > 0; i-- {
		j, err := randInt(i + 1)
		if err != nil {
			return "", err
		}
		out[i], out[j] = out[j], out[i]
	}
	return string(out), nil
}

// Username is CredHub's generated user name: 20 letters, no digits.
func Username() (string, error) {
	return Password(PasswordParams{Length: 20, ExcludeNumber: true})
}

func pick(set string) (byte, error) {
	i, err := randInt(len(set))
	if err != nil {
		return 0, err
	}
	return set[i], nil
}

func randInt(n int) (int, error) {
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		return 0, err
	}
	return int(v.Int64()), nil
}
