package remote

import (
	"bytes"
	"encoding/json"

	"github.com/omar-selfplay/omar/seeds"
)

// Seeds travel as decimal strings (seeds.JSON): the page reads this API
// with JavaScript, whose numbers round integers above 2^53, and a rounded
// seed deals another episode. Numbers are still read.

type createRequestFields CreateRequest

// MarshalJSON writes r with its seed as a decimal string.
func (r CreateRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		*createRequestFields
		Seed *seeds.JSON `json:"seed,omitempty"`
	}{(*createRequestFields)(&r), seeds.Ptr(r.Seed)})
}

// UnmarshalJSON reads a request whose seed is a decimal string or a
// number. Unknown fields are errors, as everywhere in a request body
// (DecodeStrict's settings do not reach a type's own UnmarshalJSON).
func (r *CreateRequest) UnmarshalJSON(b []byte) error {
	aux := struct {
		*createRequestFields
		Seed *seeds.JSON `json:"seed,omitempty"`
	}{createRequestFields: (*createRequestFields)(r)}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return err
	}
	r.Seed = aux.Seed.Uint64()
	return nil
}

type episodeInfoFields EpisodeInfo

// MarshalJSON writes i with its seed as a decimal string.
func (i EpisodeInfo) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		*episodeInfoFields
		Seed *seeds.JSON `json:"seed,omitempty"`
	}{(*episodeInfoFields)(&i), seeds.Ptr(i.Seed)})
}

// UnmarshalJSON reads an episode's description whose seed is a decimal
// string or a number.
func (i *EpisodeInfo) UnmarshalJSON(b []byte) error {
	aux := struct {
		*episodeInfoFields
		Seed *seeds.JSON `json:"seed,omitempty"`
	}{episodeInfoFields: (*episodeInfoFields)(i)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	i.Seed = aux.Seed.Uint64()
	return nil
}
