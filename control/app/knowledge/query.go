package knowledge

import (
	"strings"
	"unicode"
)

// maxTerms bounds the words of one search.
const maxTerms = 24

// stopwords are words too common to find anything by (English; other languages' words are kept,
// and BM25 weighs common words down anyway).
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for w := range strings.FieldsSeq(`a about above after again against all am an and any are as at be because been before being
	below between both but by can could did do does doing down during each few for from further had has have having he her here
	hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only
	or other our ours ourselves out over own same she should so some such than that the their theirs them themselves then there
	these they this those through to too under until up very was we were what when where which while who whom why will with would
	you your yours yourself yourselves tell please explain know want need get got let lets say said does mean means`) {
		m[w] = true
	}
	return m
}()

// Terms turns what a person said or typed into the words to search for: lower case, letters and
// digits only (no search operators reach the engine), without stopwords or repeats.
func Terms(text string) []string {
	seen := map[string]bool{}
	var out []string
	for w := range strings.FieldsFuncSeq(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(w) < 2 && !unicode.IsDigit(rune(w[0])) || stopwords[w] || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
		if len(out) == maxTerms {
			break
		}
	}
	return out
}
