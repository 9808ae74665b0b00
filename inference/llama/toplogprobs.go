package llama

import (
	"math"

	"github.com/omar-selfplay/omar/inference"
)

// topLogprobs returns the n largest logits as log-probabilities of the raw
// softmax (lse is its log-sum-exp), most likely first; ties keep the lower
// token id first, so the list is deterministic. n is small (OpenAI allows
// 20), so an insertion into a short sorted list beats sorting the
// vocabulary.
func topLogprobs(logits []float32, n int, lse float64) []inference.TokenLogprob {
	n = min(n, len(logits))
	top := make([]inference.TokenLogprob, 0, n)
	for i, l := range logits {
		if len(top) == n && l <= top[n-1].Logprob {
			continue
		}
		if math.IsNaN(float64(l)) {
			continue
		}
		k := len(top)
		if k < n {
			top = append(top, inference.TokenLogprob{})
		} else {
			k = n - 1
		}
		for k > 0 && top[k-1].Logprob < l {
			top[k] = top[k-1]
			k--
		}
		top[k] = inference.TokenLogprob{Token: int32(i), Logprob: l}
	}
	for k := range top {
		top[k].Logprob = float32(float64(top[k].Logprob) - lse)
	}
	return top
}
