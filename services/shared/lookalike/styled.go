package lookalike

import (
	"sort"
	"strings"
	"unicode"
)

// This file holds the look-alikes that are no letters of another script:
// styled forms of Latin letters (𝐩𝐚𝐲𝐩𝐚𝐥, ｐａｙｐａｌ, ⓟ, ⒜, ᵖ, ℓ) and digits of
// other scripts (g൦൦gle with Malayalam zeros). The standard library has no
// compatibility normalisation (NFKC) nor character names, so the ranges
// whose names and letters follow a pattern are mapped arithmetically and
// the rest come from small tables taken from Unicode's data (names from
// UnicodeData, twins from the confusables of UTS #39).

// styledRune is a rune drawn as a styled form of another letter: its
// Unicode name and the letters it passes for.
type styledRune struct{ name, like string }

// fullwidthOrRoman reports whether r is a fullwidth Latin letter or a
// Roman numeral: the styled forms East Asian text uses as ordinary
// typography (Ｔシャツ, 第Ⅱ章), so they are no spoof beside such letters.
func fullwidthOrRoman(r rune) bool {
	return r >= 0xFF21 && r <= 0xFF5A || r >= 0x2160 && r <= 0x217F
}

// mathStyles are the styles of the Latin letters of the Mathematical
// Alphanumeric Symbols block, 52 letters (A–Z, a–z) each from U+1D400,
// in Unicode's order; a style's missing letters (the italic h is U+210E)
// are unassigned code points there.
var mathStyles = []string{"BOLD", "ITALIC", "BOLD ITALIC", "SCRIPT", "BOLD SCRIPT", "FRAKTUR", "DOUBLE-STRUCK",
	"BOLD FRAKTUR", "SANS-SERIF", "SANS-SERIF BOLD", "SANS-SERIF ITALIC", "SANS-SERIF BOLD ITALIC", "MONOSPACE"}

// mathGreekStyles are the styles of the block's Greek letters, 58 each
// from U+1D6A8 (mathGreek).
var mathGreekStyles = []string{"BOLD", "ITALIC", "BOLD ITALIC", "SANS-SERIF BOLD", "SANS-SERIF BOLD ITALIC"}

// mathGreek are the 58 letters of each style of mathGreekStyles: the
// Unicode name's end and the Greek letter it is a form of.
var mathGreek = []struct {
	name   string
	letter rune
}{
	{"CAPITAL ALPHA", 'Α'}, {"CAPITAL BETA", 'Β'}, {"CAPITAL GAMMA", 'Γ'}, {"CAPITAL DELTA", 'Δ'},
	{"CAPITAL EPSILON", 'Ε'}, {"CAPITAL ZETA", 'Ζ'}, {"CAPITAL ETA", 'Η'}, {"CAPITAL THETA", 'Θ'},
	{"CAPITAL IOTA", 'Ι'}, {"CAPITAL KAPPA", 'Κ'}, {"CAPITAL LAMDA", 'Λ'}, {"CAPITAL MU", 'Μ'},
	{"CAPITAL NU", 'Ν'}, {"CAPITAL XI", 'Ξ'}, {"CAPITAL OMICRON", 'Ο'}, {"CAPITAL PI", 'Π'},
	{"CAPITAL RHO", 'Ρ'}, {"CAPITAL THETA SYMBOL", 'ϴ'}, {"CAPITAL SIGMA", 'Σ'}, {"CAPITAL TAU", 'Τ'},
	{"CAPITAL UPSILON", 'Υ'}, {"CAPITAL PHI", 'Φ'}, {"CAPITAL CHI", 'Χ'}, {"CAPITAL PSI", 'Ψ'},
	{"CAPITAL OMEGA", 'Ω'}, {"NABLA", '∇'},
	{"SMALL ALPHA", 'α'}, {"SMALL BETA", 'β'}, {"SMALL GAMMA", 'γ'}, {"SMALL DELTA", 'δ'},
	{"SMALL EPSILON", 'ε'}, {"SMALL ZETA", 'ζ'}, {"SMALL ETA", 'η'}, {"SMALL THETA", 'θ'},
	{"SMALL IOTA", 'ι'}, {"SMALL KAPPA", 'κ'}, {"SMALL LAMDA", 'λ'}, {"SMALL MU", 'μ'},
	{"SMALL NU", 'ν'}, {"SMALL XI", 'ξ'}, {"SMALL OMICRON", 'ο'}, {"SMALL PI", 'π'},
	{"SMALL RHO", 'ρ'}, {"SMALL FINAL SIGMA", 'ς'}, {"SMALL SIGMA", 'σ'}, {"SMALL TAU", 'τ'},
	{"SMALL UPSILON", 'υ'}, {"SMALL PHI", 'φ'}, {"SMALL CHI", 'χ'}, {"SMALL PSI", 'ψ'},
	{"SMALL OMEGA", 'ω'}, {"PARTIAL DIFFERENTIAL", '∂'},
	{"EPSILON SYMBOL", 'ϵ'}, {"THETA SYMBOL", 'ϑ'}, {"KAPPA SYMBOL", 'ϰ'}, {"PHI SYMBOL", 'ϕ'},
	{"RHO SYMBOL", 'ϱ'}, {"PI SYMBOL", 'ϖ'},
}

// enclosedLatin are the runs of 26 enclosed Latin letters (A–Z), each by
// its first code point and the start of its letters' Unicode names.
var enclosedLatin = []struct {
	first rune
	name  string
	a     rune
}{
	{0x24B6, "CIRCLED LATIN CAPITAL LETTER", 'A'}, {0x24D0, "CIRCLED LATIN SMALL LETTER", 'a'},
	{0x1F130, "SQUARED LATIN CAPITAL LETTER", 'A'}, {0x1F150, "NEGATIVE CIRCLED LATIN CAPITAL LETTER", 'A'},
	{0x1F170, "NEGATIVE SQUARED LATIN CAPITAL LETTER", 'A'},
	{0xFF21, "FULLWIDTH LATIN CAPITAL LETTER", 'A'}, {0xFF41, "FULLWIDTH LATIN SMALL LETTER", 'a'},
	{0x249C, "PARENTHESIZED LATIN SMALL LETTER", 'a'}, {0x1F110, "PARENTHESIZED LATIN CAPITAL LETTER", 'A'},
}

// styledLetters are the other styled letters whose compatibility form
// (NFKC) is Latin: letterlike symbols, Roman numerals and ligatures.
// Symbols that read as words (™, №) and ℹ, an emoji, are left out.
var styledLetters = map[rune]styledRune{
	0x2102: {"DOUBLE-STRUCK CAPITAL C", "C"}, 0x210A: {"SCRIPT SMALL G", "g"}, 0x210B: {"SCRIPT CAPITAL H", "H"},
	0x210C: {"BLACK-LETTER CAPITAL H", "H"}, 0x210D: {"DOUBLE-STRUCK CAPITAL H", "H"}, 0x210E: {"PLANCK CONSTANT", "h"},
	0x2110: {"SCRIPT CAPITAL I", "I"}, 0x2111: {"BLACK-LETTER CAPITAL I", "I"}, 0x2112: {"SCRIPT CAPITAL L", "L"},
	0x2113: {"SCRIPT SMALL L", "l"}, 0x2115: {"DOUBLE-STRUCK CAPITAL N", "N"}, 0x2119: {"DOUBLE-STRUCK CAPITAL P", "P"},
	0x211A: {"DOUBLE-STRUCK CAPITAL Q", "Q"}, 0x211B: {"SCRIPT CAPITAL R", "R"}, 0x211C: {"BLACK-LETTER CAPITAL R", "R"},
	0x211D: {"DOUBLE-STRUCK CAPITAL R", "R"}, 0x2124: {"DOUBLE-STRUCK CAPITAL Z", "Z"}, 0x2128: {"BLACK-LETTER CAPITAL Z", "Z"},
	0x212A: {"KELVIN SIGN", "K"}, 0x212C: {"SCRIPT CAPITAL B", "B"}, 0x212D: {"BLACK-LETTER CAPITAL C", "C"},
	0x212F: {"SCRIPT SMALL E", "e"}, 0x2130: {"SCRIPT CAPITAL E", "E"}, 0x2131: {"SCRIPT CAPITAL F", "F"},
	0x2133: {"SCRIPT CAPITAL M", "M"}, 0x2134: {"SCRIPT SMALL O", "o"},
	0x2145: {"DOUBLE-STRUCK ITALIC CAPITAL D", "D"}, 0x2146: {"DOUBLE-STRUCK ITALIC SMALL D", "d"},
	0x2147: {"DOUBLE-STRUCK ITALIC SMALL E", "e"}, 0x2148: {"DOUBLE-STRUCK ITALIC SMALL I", "i"},
	0x2149: {"DOUBLE-STRUCK ITALIC SMALL J", "j"},
	0x2160: {"ROMAN NUMERAL ONE", "I"}, 0x2161: {"ROMAN NUMERAL TWO", "II"}, 0x2162: {"ROMAN NUMERAL THREE", "III"},
	0x2163: {"ROMAN NUMERAL FOUR", "IV"}, 0x2164: {"ROMAN NUMERAL FIVE", "V"}, 0x2165: {"ROMAN NUMERAL SIX", "VI"},
	0x2166: {"ROMAN NUMERAL SEVEN", "VII"}, 0x2167: {"ROMAN NUMERAL EIGHT", "VIII"}, 0x2168: {"ROMAN NUMERAL NINE", "IX"},
	0x2169: {"ROMAN NUMERAL TEN", "X"}, 0x216A: {"ROMAN NUMERAL ELEVEN", "XI"}, 0x216B: {"ROMAN NUMERAL TWELVE", "XII"},
	0x216C: {"ROMAN NUMERAL FIFTY", "L"}, 0x216D: {"ROMAN NUMERAL ONE HUNDRED", "C"},
	0x216E: {"ROMAN NUMERAL FIVE HUNDRED", "D"}, 0x216F: {"ROMAN NUMERAL ONE THOUSAND", "M"},
	0x2170: {"SMALL ROMAN NUMERAL ONE", "i"}, 0x2171: {"SMALL ROMAN NUMERAL TWO", "ii"},
	0x2172: {"SMALL ROMAN NUMERAL THREE", "iii"}, 0x2173: {"SMALL ROMAN NUMERAL FOUR", "iv"},
	0x2174: {"SMALL ROMAN NUMERAL FIVE", "v"}, 0x2175: {"SMALL ROMAN NUMERAL SIX", "vi"},
	0x2176: {"SMALL ROMAN NUMERAL SEVEN", "vii"}, 0x2177: {"SMALL ROMAN NUMERAL EIGHT", "viii"},
	0x2178: {"SMALL ROMAN NUMERAL NINE", "ix"}, 0x2179: {"SMALL ROMAN NUMERAL TEN", "x"},
	0x217A: {"SMALL ROMAN NUMERAL ELEVEN", "xi"}, 0x217B: {"SMALL ROMAN NUMERAL TWELVE", "xii"},
	0x217C: {"SMALL ROMAN NUMERAL FIFTY", "l"}, 0x217D: {"SMALL ROMAN NUMERAL ONE HUNDRED", "c"},
	0x217E: {"SMALL ROMAN NUMERAL FIVE HUNDRED", "d"}, 0x217F: {"SMALL ROMAN NUMERAL ONE THOUSAND", "m"},
	0xFB00: {"LATIN SMALL LIGATURE FF", "ff"}, 0xFB01: {"LATIN SMALL LIGATURE FI", "fi"},
	0xFB02: {"LATIN SMALL LIGATURE FL", "fl"}, 0xFB03: {"LATIN SMALL LIGATURE FFI", "ffi"},
	0xFB04: {"LATIN SMALL LIGATURE FFL", "ffl"}, 0xFB05: {"LATIN SMALL LIGATURE LONG S T", "st"},
	0xFB06:  {"LATIN SMALL LIGATURE ST", "st"},
	0x1D6A4: {"MATHEMATICAL ITALIC SMALL DOTLESS I", "i"}, 0x1D6A5: {"MATHEMATICAL ITALIC SMALL DOTLESS J", "j"},
}

// modifierLetters are the superscript and subscript forms of Latin
// letters (modifier letters whose compatibility form, NFKC, is one:
// ᵖ, ᴬ, ₐ), from UnicodeData. Unicode counts them as Latin letters, and in
// prose they are its typography (Mᵐᵉ, xⁿ, 1ˢᵗ), so they are look-alikes
// only in a host, path, address or e-mail address (modifierLetter), where
// ᵖaypal.com reads as, and resolves to, paypal.com. The feminine and
// masculine ordinal indicators (ª, º: 1º, nº) are left out.
var modifierLetters = map[rune]styledRune{
	0x2B0: {"MODIFIER LETTER SMALL H", "h"}, 0x2B2: {"MODIFIER LETTER SMALL J", "j"},
	0x2B3: {"MODIFIER LETTER SMALL R", "r"}, 0x2B7: {"MODIFIER LETTER SMALL W", "w"},
	0x2B8: {"MODIFIER LETTER SMALL Y", "y"}, 0x2E1: {"MODIFIER LETTER SMALL L", "l"},
	0x2E2: {"MODIFIER LETTER SMALL S", "s"}, 0x2E3: {"MODIFIER LETTER SMALL X", "x"},
	0x1D2C: {"MODIFIER LETTER CAPITAL A", "A"}, 0x1D2E: {"MODIFIER LETTER CAPITAL B", "B"},
	0x1D30: {"MODIFIER LETTER CAPITAL D", "D"}, 0x1D31: {"MODIFIER LETTER CAPITAL E", "E"},
	0x1D33: {"MODIFIER LETTER CAPITAL G", "G"}, 0x1D34: {"MODIFIER LETTER CAPITAL H", "H"},
	0x1D35: {"MODIFIER LETTER CAPITAL I", "I"}, 0x1D36: {"MODIFIER LETTER CAPITAL J", "J"},
	0x1D37: {"MODIFIER LETTER CAPITAL K", "K"}, 0x1D38: {"MODIFIER LETTER CAPITAL L", "L"},
	0x1D39: {"MODIFIER LETTER CAPITAL M", "M"}, 0x1D3A: {"MODIFIER LETTER CAPITAL N", "N"},
	0x1D3C: {"MODIFIER LETTER CAPITAL O", "O"}, 0x1D3E: {"MODIFIER LETTER CAPITAL P", "P"},
	0x1D3F: {"MODIFIER LETTER CAPITAL R", "R"}, 0x1D40: {"MODIFIER LETTER CAPITAL T", "T"},
	0x1D41: {"MODIFIER LETTER CAPITAL U", "U"}, 0x1D42: {"MODIFIER LETTER CAPITAL W", "W"},
	0x1D43: {"MODIFIER LETTER SMALL A", "a"}, 0x1D47: {"MODIFIER LETTER SMALL B", "b"},
	0x1D48: {"MODIFIER LETTER SMALL D", "d"}, 0x1D49: {"MODIFIER LETTER SMALL E", "e"},
	0x1D4D: {"MODIFIER LETTER SMALL G", "g"}, 0x1D4F: {"MODIFIER LETTER SMALL K", "k"},
	0x1D50: {"MODIFIER LETTER SMALL M", "m"}, 0x1D52: {"MODIFIER LETTER SMALL O", "o"},
	0x1D56: {"MODIFIER LETTER SMALL P", "p"}, 0x1D57: {"MODIFIER LETTER SMALL T", "t"},
	0x1D58: {"MODIFIER LETTER SMALL U", "u"}, 0x1D5B: {"MODIFIER LETTER SMALL V", "v"},
	0x1D62: {"LATIN SUBSCRIPT SMALL LETTER I", "i"}, 0x1D63: {"LATIN SUBSCRIPT SMALL LETTER R", "r"},
	0x1D64: {"LATIN SUBSCRIPT SMALL LETTER U", "u"}, 0x1D65: {"LATIN SUBSCRIPT SMALL LETTER V", "v"},
	0x1D9C: {"MODIFIER LETTER SMALL C", "c"}, 0x1DA0: {"MODIFIER LETTER SMALL F", "f"},
	0x1DBB: {"MODIFIER LETTER SMALL Z", "z"}, 0x2071: {"SUPERSCRIPT LATIN SMALL LETTER I", "i"},
	0x207F: {"SUPERSCRIPT LATIN SMALL LETTER N", "n"}, 0x2090: {"LATIN SUBSCRIPT SMALL LETTER A", "a"},
	0x2091: {"LATIN SUBSCRIPT SMALL LETTER E", "e"}, 0x2092: {"LATIN SUBSCRIPT SMALL LETTER O", "o"},
	0x2093: {"LATIN SUBSCRIPT SMALL LETTER X", "x"}, 0x2095: {"LATIN SUBSCRIPT SMALL LETTER H", "h"},
	0x2096: {"LATIN SUBSCRIPT SMALL LETTER K", "k"}, 0x2097: {"LATIN SUBSCRIPT SMALL LETTER L", "l"},
	0x2098: {"LATIN SUBSCRIPT SMALL LETTER M", "m"}, 0x2099: {"LATIN SUBSCRIPT SMALL LETTER N", "n"},
	0x209A: {"LATIN SUBSCRIPT SMALL LETTER P", "p"}, 0x209B: {"LATIN SUBSCRIPT SMALL LETTER S", "s"},
	0x209C: {"LATIN SUBSCRIPT SMALL LETTER T", "t"}, 0x2C7C: {"LATIN SUBSCRIPT SMALL LETTER J", "j"},
	0x2C7D: {"MODIFIER LETTER CAPITAL V", "V"}, 0xA7F2: {"MODIFIER LETTER CAPITAL C", "C"},
	0xA7F3: {"MODIFIER LETTER CAPITAL F", "F"}, 0xA7F4: {"MODIFIER LETTER CAPITAL Q", "Q"},
	0x107A5: {"MODIFIER LETTER SMALL Q", "q"},
}

// modifierLetter reports whether r is one of modifierLetters.
func modifierLetter(r rune) bool {
	_, ok := modifierLetters[r]
	return ok
}

// styled is r's name and the letters it passes for when r is a styled
// letter (see styledLetters, modifierLetters, mathStyles, mathGreek,
// enclosedLatin). A
// styled Greek letter passes for the Latin letter its plain form looks
// like (𝛂 for a), else for that Greek letter.
func styled(r rune) (styledRune, bool) {
	if s, ok := styledLetters[r]; ok {
		return s, true
	}
	if s, ok := modifierLetters[r]; ok {
		return s, true
	}
	switch {
	case r >= 0x1D400 && r < 0x1D400+rune(len(mathStyles))*52:
		if !unicode.IsLetter(r) {
			return styledRune{}, false // a style's hole: unassigned
		}
		i := r - 0x1D400
		style, letter := mathStyles[i/52], i%52
		if letter < 26 {
			return styledRune{"MATHEMATICAL " + style + " CAPITAL " + string('A'+letter), string('A' + letter)}, true
		}
		return styledRune{"MATHEMATICAL " + style + " SMALL " + string('A'+letter-26), string('a' + letter - 26)}, true
	case r >= 0x1D6A8 && r < 0x1D6A8+rune(len(mathGreekStyles)*len(mathGreek)):
		i := int(r - 0x1D6A8)
		g := mathGreek[i%len(mathGreek)]
		like := string(g.letter)
		if l, ok := lookAlikeLetters[g.letter]; ok {
			like = l.like
		}
		return styledRune{"MATHEMATICAL " + mathGreekStyles[i/len(mathGreek)] + " " + g.name, like}, true
	}
	for _, e := range enclosedLatin {
		if r >= e.first && r < e.first+26 {
			return styledRune{e.name + " " + string('A'+r-e.first), string(e.a + r - e.first)}, true
		}
	}
	return styledRune{}, false
}

// passesForLatin reports whether like, what a look-alike passes for, is
// Latin: ASCII letters or digits.
func passesForLatin(like string) bool {
	return like != "" && strings.IndexFunc(like, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0
}

// digitRuns are the runs of ten decimal digits (Unicode category Nd)
// outside ASCII, each by its zero and the start of its digits' Unicode
// names ("MALAYALAM" for U+0D66 MALAYALAM DIGIT ZERO), in code point
// order.
var digitRuns = []struct {
	zero rune
	name string
}{
	{0x0660, "ARABIC-INDIC"}, {0x06F0, "EXTENDED ARABIC-INDIC"}, {0x07C0, "NKO"}, {0x0966, "DEVANAGARI"},
	{0x09E6, "BENGALI"}, {0x0A66, "GURMUKHI"}, {0x0AE6, "GUJARATI"}, {0x0B66, "ORIYA"}, {0x0BE6, "TAMIL"},
	{0x0C66, "TELUGU"}, {0x0CE6, "KANNADA"}, {0x0D66, "MALAYALAM"}, {0x0DE6, "SINHALA LITH"}, {0x0E50, "THAI"},
	{0x0ED0, "LAO"}, {0x0F20, "TIBETAN"}, {0x1040, "MYANMAR"}, {0x1090, "MYANMAR SHAN"}, {0x17E0, "KHMER"},
	{0x1810, "MONGOLIAN"}, {0x1946, "LIMBU"}, {0x19D0, "NEW TAI LUE"}, {0x1A80, "TAI THAM HORA"},
	{0x1A90, "TAI THAM THAM"}, {0x1B50, "BALINESE"}, {0x1BB0, "SUNDANESE"}, {0x1C40, "LEPCHA"},
	{0x1C50, "OL CHIKI"}, {0xA620, "VAI"}, {0xA8D0, "SAURASHTRA"}, {0xA900, "KAYAH LI"}, {0xA9D0, "JAVANESE"},
	{0xA9F0, "MYANMAR TAI LAING"}, {0xAA50, "CHAM"}, {0xABF0, "MEETEI MAYEK"}, {0xFF10, "FULLWIDTH"},
	{0x104A0, "OSMANYA"}, {0x10D30, "HANIFI ROHINGYA"}, {0x11066, "BRAHMI"}, {0x110F0, "SORA SOMPENG"},
	{0x11136, "CHAKMA"}, {0x111D0, "SHARADA"}, {0x112F0, "KHUDAWADI"}, {0x11450, "NEWA"}, {0x114D0, "TIRHUTA"},
	{0x11650, "MODI"}, {0x116C0, "TAKRI"}, {0x11730, "AHOM"}, {0x118E0, "WARANG CITI"},
	{0x11950, "DIVES AKURU"}, {0x11C50, "BHAIKSUKI"}, {0x11D50, "MASARAM GONDI"}, {0x11DA0, "GUNJALA GONDI"},
	{0x11F50, "KAWI"}, {0x16A60, "MRO"}, {0x16AC0, "TANGSA"}, {0x16B50, "PAHAWH HMONG"},
	{0x1D7CE, "MATHEMATICAL BOLD"}, {0x1D7D8, "MATHEMATICAL DOUBLE-STRUCK"}, {0x1D7E2, "MATHEMATICAL SANS-SERIF"},
	{0x1D7EC, "MATHEMATICAL SANS-SERIF BOLD"}, {0x1D7F6, "MATHEMATICAL MONOSPACE"},
	{0x1E140, "NYIAKENG PUACHUE HMONG"}, {0x1E2F0, "WANCHO"}, {0x1E4F0, "NAG MUNDARI"}, {0x1E950, "ADLAM"},
	{0x1FBF0, "SEGMENTED"},
}

// styledDigitRuns are the runs of digitRuns that are styled forms of the
// ASCII digits: each passes for the digit it is.
var styledDigitRuns = []string{"FULLWIDTH", "MATHEMATICAL BOLD", "MATHEMATICAL DOUBLE-STRUCK",
	"MATHEMATICAL SANS-SERIF", "MATHEMATICAL SANS-SERIF BOLD", "MATHEMATICAL MONOSPACE", "SEGMENTED"}

// digitTwins are the digits of other scripts drawn like a Latin letter,
// an ASCII digit or a full stop (UTS #39 confusables): the Malayalam zero
// like o, the Arabic-Indic one like l and its zero like a dot.
var digitTwins = map[rune]string{
	0x0660: ".", 0x0661: "l", 0x0665: "o", 0x0667: "V", 0x06F0: ".", 0x06F1: "l", 0x06F5: "o", 0x06F7: "V",
	0x07C0: "O", 0x0966: "o", 0x09E6: "O", 0x09EA: "8", 0x09ED: "9", 0x0A66: "o", 0x0A67: "9", 0x0A6A: "8",
	0x0AE6: "o", 0x0B66: "O", 0x0B68: "9", 0x0BE6: "o", 0x0C66: "o", 0x0CE6: "o", 0x0D66: "o", 0x0D6D: "9",
	0x0E50: "o", 0x0ED0: "o", 0x1040: "o", 0x114D0: "O", 0x118E0: "O", 0x118E5: "Z", 0x118E6: "W", 0x118E9: "C",
}

// digitWords are the digits' names in Unicode's character names.
var digitWords = []string{"ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE"}

// otherDigit is a decimal digit outside ASCII: its Unicode name ("" for
// one digitRuns does not know), the name of its run ("MALAYALAM"), its
// value and what it passes for: its twin (digitTwins), the ASCII digit
// for a styled one, else "".
type otherDigit struct {
	name, run, like string
	value           int
}

// digitOf describes r when it is a decimal digit outside ASCII.
func digitOf(r rune) (otherDigit, bool) {
	if r < 0x80 || !unicode.Is(unicode.Nd, r) {
		return otherDigit{}, false
	}
	i := sort.Search(len(digitRuns), func(i int) bool { return digitRuns[i].zero > r }) - 1
	if i < 0 || r-digitRuns[i].zero >= 10 {
		// A run newer than the table: Unicode keeps each run's digits
		// 0–9 in order, so its value still follows from unicode.Nd.
		return otherDigit{value: ndValue(r), like: digitTwins[r]}, true
	}
	run := digitRuns[i]
	d := otherDigit{run: run.name, value: int(r - run.zero), like: digitTwins[r]}
	d.name = run.name + " DIGIT " + digitWords[d.value]
	for _, s := range styledDigitRuns {
		if s == run.name {
			d.like = string(rune('0' + d.value))
		}
	}
	return d, true
}

// ndValue is a decimal digit's value from the ranges of unicode.Nd, each
// a whole number of runs from a zero.
func ndValue(r rune) int {
	for _, rg := range unicode.Nd.R16 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	return 0
}

// runLabel is a digit run's name as a summary says it: "Malayalam",
// "Arabic-Indic", "Fullwidth".
func runLabel(run string) string {
	if run == "" {
		return "other"
	}
	b := []byte(strings.ToLower(run))
	for i := range b {
		if (i == 0 || b[i-1] == ' ' || b[i-1] == '-') && b[i] >= 'a' && b[i] <= 'z' {
			b[i] = b[i] - 'a' + 'A'
		}
	}
	return string(b)
}
