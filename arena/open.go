package arena

// SeqSlots is the number of llama sequence slots that hold every model
// seat of Parallel episodes of the largest game of o.
func (o Options) SeqSlots() (int, error) {
	es, err := o.resolve()
	if err != nil {
		return 0, err
	}
	seats := 1
	for _, e := range es {
		s, err := e.game.Seats(e.params)
		if err != nil {
			return 0, err
		}
		seats = max(seats, len(s))
	}
	return o.Parallel * seats, nil
}
