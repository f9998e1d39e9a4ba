package listing

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/svat/partnerapi/internal/records/validate"
)

// Limits of the q parameter, in characters.
const (
	MinSearch = 2
	MaxSearch = 100
)

// indexedWords is how many words of q the list queries look up in the
// search index (search.contact_folded, migrations 00210 and 00211); the others are
// checked on the rows those found.
const indexedWords = 2

// minIndexedWord is the length from which a word has a trigram the index
// can look up: a shorter one is checked on the rows, never looked up.
const minIndexedWord = 3

// Search is a parsed q: every word must be a case- and accent-insensitive
// substring of one of the record's searched fields (product.md, "Lists").
// The list queries fold case and accents (search.fold) and take the
// words in two parts: Indexed, the longest, each looked up in the index
// (nil for none), and Rest, checked on the rows found.
type Search struct {
	Indexed [indexedWords]*string
	// Rest is never nil: an empty list is no word.
	Rest []string
	// Bound is q as the cursor binds it: the words, one space apart; ""
	// for no search.
	Bound string
}

// ParseSearch parses q: 2 to 100 characters once trimmed, split on white
// space; "" is no search.
func ParseSearch(q string) (Search, error) {
	s := Search{Rest: []string{}}
	if q == "" {
		return s, nil
	}
	if !validate.CleanText(q) {
		return s, Invalid("q", validate.CleanTextMessage)
	}
	t := strings.TrimSpace(q)
	if n := utf8.RuneCountInString(t); n < MinSearch || n > MaxSearch {
		return s, Invalid("q", "must be from 2 to 100 characters")
	}
	words := strings.Fields(t)
	s.Bound = strings.Join(words, " ")
	// A word given twice is one condition.
	slices.Sort(words)
	words = slices.Compact(words)
	// The longest words are the most selective: they are looked up.
	slices.SortStableFunc(words, func(a, b string) int {
		return cmp.Compare(utf8.RuneCountInString(b), utf8.RuneCountInString(a))
	})
	i := 0
	for _, w := range words {
		if i < indexedWords && utf8.RuneCountInString(w) >= minIndexedWord {
			s.Indexed[i] = &w
			i++
			continue
		}
		s.Rest = append(s.Rest, w)
	}
	return s, nil
}

// Bind adds q to the filters a list's cursor is bound to.
func (s Search) Bind(filters url.Values) {
	if s.Bound != "" {
		filters.Set("q", s.Bound)
	}
}
