package engine

// Preferences are what one seat privately wants, as its scenario states
// them for scoring code: the theory-of-mind trace's INFER reward scores a
// seat's belief about its counterpart against them. They are never shown
// to another seat.
type Preferences struct {
	// Issues are the seat's values of the items or issues under
	// negotiation (higher is wanted more), in the game's order.
	Issues []Issue `json:"issues,omitempty"`
	// Price, when Scale > 0, is the seat's private price bound (a buyer's
	// target or most it pays, a seller's least), and Scale the public
	// price it is judged against (the listing or asking price).
	Price float64 `json:"price,omitempty"`
	Scale float64 `json:"scale,omitempty"`
}

// Issue is one item or issue of Preferences: the words that name it (the
// first its canonical name) and its value to the seat.
type Issue struct {
	Names []string `json:"names"`
	Value float64  `json:"value"`
}

// PreferenceScenario is implemented by dealt scenarios (Record.Scenario)
// that know their seats' private preferences; ok is false for a seat with
// none (a Craigslist seller's bottom line is not part of the game).
type PreferenceScenario interface {
	Preferences(seat int) (p Preferences, ok bool)
}
