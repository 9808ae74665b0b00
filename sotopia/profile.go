package sotopia

import (
	"fmt"
	"slices"
	"strings"
)

// ProfileView is the part of another character's profile an agent may see.
// It has no secret field on purpose: a secret is only ever shown to its
// owner (and to the judge).
type ProfileView struct {
	Name          string   `json:"name,omitempty"`
	Age           int      `json:"age,omitempty"`
	Occupation    string   `json:"occupation,omitempty"`
	Gender        string   `json:"gender,omitempty"`
	Pronouns      string   `json:"pronouns,omitempty"`
	PublicInfo    string   `json:"public_info,omitempty"`
	Personality   string   `json:"personality,omitempty"`
	Values        []string `json:"values,omitempty"`
	DecisionStyle string   `json:"decision_style,omitempty"`
}

// level is a relationship's rank in Relationships (0 = stranger).
func (r Relationship) level() int { return slices.Index(Relationships, r) }

// Visible returns what an agent in relationship r sees of character c:
//
//	stranger      nothing (only what the scenario text says)
//	know_by_name  name
//	acquaintance  + age, occupation, gender, pronouns
//	friend        + public info, personality, values
//	romantic      + decision style (everything but the secret)
//	family        same as romantic
func Visible(c Character, r Relationship) ProfileView {
	var v ProfileView
	l := r.level()
	if l >= KnowByName.level() {
		v.Name = c.Name
	}
	if l >= Acquaintance.level() {
		v.Age, v.Occupation, v.Gender, v.Pronouns = c.Age, c.Occupation, c.Gender, c.Pronouns
	}
	if l >= Friend.level() {
		v.PublicInfo, v.Personality, v.Values = c.PublicInfo, c.Personality, slices.Clone(c.Values)
	}
	if l >= Romantic.level() {
		v.DecisionStyle = c.DecisionStyle
	}
	return v
}

// Describe renders a view as the lines of a briefing. An empty view says
// that nothing is known.
func (v ProfileView) Describe() string {
	var b strings.Builder
	line := func(k, val string) {
		if val != "" {
			fmt.Fprintf(&b, "- %s: %s\n", k, val)
		}
	}
	line("Name", v.Name)
	if v.Age > 0 {
		line("Age", fmt.Sprint(v.Age))
	}
	line("Occupation", v.Occupation)
	if v.Gender != "" {
		line("Gender", v.Gender+" ("+v.Pronouns+")")
	}
	line("Public information", v.PublicInfo)
	line("Personality", v.Personality)
	line("Values", strings.Join(v.Values, ", "))
	line("Decision style", v.DecisionStyle)
	if b.Len() == 0 {
		return "- You know nothing about them beyond what the scenario says.\n"
	}
	return b.String()
}

// describeFull renders a whole profile, secret included, for its owner and
// for the judge.
func describeFull(c Character) string {
	v := Visible(c, Family)
	return v.Describe() + fmt.Sprintf("- Secret: %s\n", c.Secret)
}

// displayName is how an agent refers to the other character in its
// observations: by name only when the relationship reveals the name.
func displayName(c Character, r Relationship) string {
	if r.level() >= KnowByName.level() {
		return c.Name
	}
	return "The other person"
}
