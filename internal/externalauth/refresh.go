package externalauth

import "time"

// DefaultRefreshMargin is how long before its expiry an access token is refreshed: git asks for it
// and then talks to the forge, so a token handed out must outlive the operation.
const DefaultRefreshMargin = 5 * time.Minute

// TokenState is what the refresh decision reads of a link.
type TokenState struct {
	// ExpiresAt is the access token's expiry (nil: it does not expire).
	ExpiresAt *time.Time
	// CanRefresh is whether the forge gave a refresh token.
	CanRefresh bool
	// RelinkReason is set once the forge refused the refresh token.
	RelinkReason string
}

// Decision is what Token does with a link.
type Decision int

const (
	// Use hands out the stored access token.
	Use Decision = iota
	// Refresh exchanges the refresh token first.
	Refresh
	// Relink refuses: the user must link the forge again.
	Relink
)

func (d Decision) String() string {
	return [...]string{"use", "refresh", "relink"}[d]
}

// Decide says what to do with a link at now: use its access token while it has more than margin
// to live (or never expires), refresh it when it has less and a refresh token is there, and ask
// for a new link once the forge refused the refresh token or the access token expired with none
// to refresh it. An access token with less than margin left and no refresh token is still used
// until it expires: it is the best there is.
func Decide(s TokenState, now time.Time, margin time.Duration) (Decision, string) {
	switch {
	case s.RelinkReason != "":
		return Relink, s.RelinkReason
	case s.ExpiresAt == nil || now.Add(margin).Before(*s.ExpiresAt):
		return Use, ""
	case s.CanRefresh:
		return Refresh, ""
	case now.Before(*s.ExpiresAt):
		return Use, ""
	}
	return Relink, "the access token expired at " + s.ExpiresAt.UTC().Format(time.RFC3339) + " and the forge gave no refresh token"
}
