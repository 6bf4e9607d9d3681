package console

import (
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// TestAnUnknownNameCostsWhatAKnownOneDoes: the dummy hash an unknown user
// name is checked against has the cost of the hashes users get, so a
// sign-in takes as long whether the name exists or not.
func TestAnUnknownNameCostsWhatAKnownOneDoes(t *testing.T) {
	s, err := newStore(nil, config.Console{}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	user, err := HashPassword("a long enough password")
	if err != nil {
		t.Fatal(err)
	}
	dummyCost, _ := bcrypt.Cost(s.dummyH)
	userCost, _ := bcrypt.Cost([]byte(user))
	if dummyCost != userCost {
		t.Fatalf("an unknown name costs bcrypt %d, a known one %d", dummyCost, userCost)
	}
}
