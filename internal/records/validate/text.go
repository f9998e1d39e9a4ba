package validate

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Lines says whether a text field may span lines.
type Lines bool

// Text fields are single-line unless they say otherwise.
const (
	// SingleLine fields (names, titles, ids) refuse every control
	// character, tab and line break included: a stored line break or
	// escape sequence would split a CSV row or a log line, or drive the
	// terminal of whoever reads the export.
	SingleLine Lines = false
	// MultiLine fields (a lead's message) keep \n, \r and \t, and the
	// Unicode line and paragraph separators, and refuse the rest.
	MultiLine Lines = true
)

// TextProblem returns why s may not be stored in a text field, or "" when
// it may. It refuses invalid UTF-8 and NUL (PostgreSQL holds neither), and
// the characters that change how text shows rather than what it says:
//
//   - C0 and C1 controls (U+0000–U+001F, U+007F–U+009F), but for \t, \n
//     and \r in a [MultiLine] field. An ESC starts a terminal escape
//     sequence; a line break forges a CSV row or a log line.
//   - Bidirectional controls: the embeddings and overrides U+202A–U+202E,
//     the isolates U+2066–U+2069, and the marks U+200E, U+200F and U+061C.
//     They reorder what an admin tool or a spreadsheet displays ("Trojan
//     Source"), so a name can read as something else.
//   - Invisible characters: U+200B (zero width space), U+2060–U+2064
//     (word joiner, invisible operators), U+206A–U+206F (deprecated format
//     controls), U+FEFF (BOM), and U+2028/U+2029 in a [SingleLine] field.
//     They make two values that look the same differ, and hide text.
//   - U+200C and U+200D (zero width non-joiner and joiner), except
//     between two non-ASCII letters, marks or emoji. There they are part
//     of ordinary writing: Persian (حسین‌زاده) and the Indic scripts (ශ්‍රී)
//     need them, and emoji sequences such as 👩‍💻 and 🏳️‍🌈 are joined by
//     U+200D. Anywhere else (alone, leading, trailing, next to ASCII or to
//     a space) they are only invisible.
//
// Letters of every script, marks, punctuation, symbols and emoji pass.
// It is one pass over the bytes, with a fast path for ASCII, because it
// runs on every text field of every lead ingested.
func TextProblem(s string, lines Lines) string {
	_, msg := scanText(s, lines)
	return msg
}

// scanText counts the characters of s and returns, when s holds a
// character the field refuses, the message that says so. After the
// UTF-8 check (which has its own ASCII fast path) it is one loop over the
// bytes: printable ASCII and continuation bytes cost a comparison or two,
// and only the four lead bytes of the blocks that hold a refused
// character (U+0080, U+0600, U+2000 and U+F000) are decoded.
func scanText(s string, lines Lines) (chars int, problem string) {
	if !utf8.ValidString(s) {
		return 0, CleanTextMessage
	}
	cont := 0 // continuation bytes: every other byte starts a character
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f:
		case c&0xc0 == 0x80:
			cont++
		case c == 0:
			return 0, CleanTextMessage
		case c < 0x20 || c == 0x7f:
			if lines == SingleLine || c != '\n' && c != '\r' && c != '\t' {
				return 0, refusal(rune(c))
			}
		case c == 0xc2 || c == 0xd8 || c == 0xe2 || c == 0xef:
			r, size := utf8.DecodeRuneInString(s[i:])
			if refused(r, lines) && !(joiner(r) && joins(s[:i], s[i+size:])) {
				return 0, refusal(r)
			}
		}
	}
	return len(s) - cont, ""
}

// refused reports whether r, a non-ASCII rune, is refused in a field of
// the given kind (before the joiner exception). scanText decodes only
// the runes whose lead byte starts a block that holds one of these: keep
// the two in step.
func refused(r rune, lines Lines) bool {
	switch {
	case r < 0xa0: // C1 controls
		return true
	case r == 0x61c, r == 0xfeff:
		return true
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e:
		return true
	case r == 0x2028, r == 0x2029:
		return lines == SingleLine
	case r >= 0x2060 && r <= 0x2064, r >= 0x2066 && r <= 0x206f:
		return true
	}
	return false
}

func joiner(r rune) bool { return r == 0x200c || r == 0x200d }

// joins reports whether a zero width (non-)joiner between before and
// after is part of ordinary writing: the characters on both sides are
// non-ASCII letters, marks (a virama, a variation selector) or emoji.
func joins(before, after string) bool {
	prev, _ := utf8.DecodeLastRuneInString(before)
	next, _ := utf8.DecodeRuneInString(after)
	return joinable(prev) && joinable(next)
}

func joinable(r rune) bool {
	if r < utf8.RuneSelf || r == utf8.RuneError {
		return false
	}
	return unicode.IsLetter(r) || unicode.IsMark(r) || pictographic(r)
}

// pictographic approximates Unicode's Extended_Pictographic with the
// blocks emoji come from, including the symbols that appear inside ZWJ
// sequences (♀ U+2640, ⚕ U+2695, ✈ U+2708, ❄ U+2744, ⬛ U+2B1B, ↔ U+2194,
// ➡ U+27A1).
func pictographic(r rune) bool {
	switch {
	case r >= 0x1f000 && r <= 0x1ffff:
		return true
	case r >= 0x2190 && r <= 0x21ff, r >= 0x2300 && r <= 0x23ff, r >= 0x25a0 && r <= 0x27bf,
		r >= 0x2900 && r <= 0x297f, r >= 0x2b00 && r <= 0x2bff:
		return true
	case r == 0x00a9, r == 0x00ae, r == 0x203c, r == 0x2049, r == 0x2122, r == 0x2139, r == 0x3030, r == 0x303d, r == 0x3297, r == 0x3299:
		return true
	}
	return false
}

// refusal words the 422 message of a refused character, naming it by its
// code point so the caller can find it in text that hides it.
func refusal(r rune) string {
	name := fmt.Sprintf("U+%04X", r)
	switch {
	case r == '\n' || r == '\r' || r == '\t' || r == 0x2028 || r == 0x2029:
		return "must be a single line: " + name + " (a tab or line break) is not allowed here"
	case r < 0xa0:
		return "must not contain control characters such as " + name
	case r == 0x61c || r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
		return "must not contain bidirectional control characters such as " + name
	case joiner(r):
		return "must not contain " + name + " except between two non-ASCII letters or emoji"
	}
	return "must not contain invisible characters such as " + name
}
