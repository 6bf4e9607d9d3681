package lookalike_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/lookalike"
)

func TestLookAlikesFindsNamesThatPassForLatin(t *testing.T) {
	// found is a LookAlike as a row states it: says is its Summary after
	// "the <kind> <text> ".
	type found struct{ text, kind, says, chars string }
	for _, tt := range []struct {
		name, in string
		want     []found
	}{
		{"a_host_with_a_cyrillic_a", "fetch https://docs.example/ then pаypal.com.", []found{{"pаypal.com", "host", "mixes Latin and Cyrillic letters", "а"}}},
		{"a_path_with_cyrillic_letters", "/etc/раsswd", []found{{"/etc/раsswd", "path", "mixes Latin and Cyrillic letters", "ра"}}},
		{"an_address", "https://gіthub.com/x", []found{{"https://gіthub.com/x", "address", "mixes Latin and Cyrillic letters", "і"}}},
		{"a_tool_name_with_a_greek_omicron", "delete_repο", []found{{"delete_repο", "name", "mixes Latin and Greek letters", "ο"}}},
		{"armenian_and_cherokee_in_one_word", "gօᏀgle", []found{{"gօᏀgle", "name", "mixes Latin, Armenian and Cherokee letters", "օᏀ"}}},
		{"a_wholly_cyrillic_label_in_a_latin_host", "аррӏе.com", []found{{"аррӏе.com", "host", "mixes Latin and Cyrillic letters", "арӏе"}}},
		{"a_mixed_word_names_letters_with_no_latin_twin", "bжd", []found{{"bжd", "name", "mixes Latin and Cyrillic letters", "ж"}}},
		{"a_zero_width_space_does_not_split_a_name", "p\u200bа\u200bypal", []found{{"p\u200bа\u200bypal", "name", "mixes Latin and Cyrillic letters", "а"}}},
		{"each_name_once", "pаypal pаypal", []found{{"pаypal", "name", "mixes Latin and Cyrillic letters", "а"}}},
		{"a_latin_alpha_in_a_host", "https://pɑypal.com/login", []found{{"https://pɑypal.com/login", "address", "mixes Latin and phonetic Latin letters", "ɑ"}}},
		{"a_script_g_in_a_host", "ɡoogle.com", []found{{"ɡoogle.com", "host", "mixes Latin and phonetic Latin letters", "ɡ"}}},
		{"a_fullwidth_full_stop_joins_a_spoofed_label_to_its_latin_one", "аррӏе．com", []found{{"аррӏе．com", "host", "mixes Latin and Cyrillic letters", "арӏе"}}},
		{"an_ideographic_full_stop_too", "аррӏе。com", []found{{"аррӏе。com", "host", "mixes Latin and Cyrillic letters", "арӏе"}}},
		{"a_greek_lunate_sigma_in_a_wholly_look_alike_label", "ѕϲоре.com", []found{{"ѕϲоре.com", "host", "mixes Latin, Cyrillic and Greek letters", "ѕϲоре"}}},
		// A name with no Latin letter at all, every letter of which passes
		// for Latin, shaped as a host, e-mail address or identifier.
		{"a_host_wholly_of_look_alike_letters", "open аррӏе.со now", []found{{"аррӏе.со", "host", "is written in Cyrillic letters that pass for Latin", "арӏесо"}}},
		{"another_host_wholly_of_look_alike_letters", "раураӏ.со", []found{{"раураӏ.со", "host", "is written in Cyrillic letters that pass for Latin", "рауӏсо"}}},
		{"an_address_whose_host_is_wholly_look_alike", "https://аррӏе.со/login", []found{{"https://аррӏе.со/login", "address", "mixes Latin and Cyrillic letters", "арӏесо"}}},
		{"an_e_mail_address_wholly_of_look_alike_letters", "mail аррӏе@со.со", []found{{"аррӏе@со.со", "e-mail address", "is written in Cyrillic letters that pass for Latin", "арӏесо"}}},
		{"an_identifier_wholly_of_look_alike_letters", "ѕсоре_ехес", []found{{"ѕсоре_ехес", "name", "is written in Cyrillic letters that pass for Latin", "ѕсорех"}}},
		{"a_greek_and_cyrillic_host_with_a_fullwidth_dot", "ΑΡΡΟ．со", []found{{"ΑΡΡΟ．со", "host", "is written in Greek and Cyrillic letters that pass for Latin", "ΑΡΟсо"}}},
		{"a_digit_with_no_twin_in_a_wholly_look_alike_label", "аррӏе१.com", []found{{"аррӏе१.com", "host", "mixes Latin and Cyrillic letters and Devanagari digits", "арӏе१"}}},
		{"real_cyrillic_and_greek_domains", "яндекс.рф пример.рф παράδειγμα.δοκιμή почта@пример.рф", nil},
		{"russian_abbreviations_and_a_word_that_passes_for_latin", "т.е. и т.д., р/с, е.а. ТОР-10 сор", nil},
		// Digits of other scripts in a Latin word, or beside ASCII digits.
		{"malayalam_zeros_in_a_host", "g൦൦gle.com", []found{{"g൦൦gle.com", "host", "mixes Latin letters and Malayalam digits", "൦"}}},
		{"devanagari_zeros", "g००gle", []found{{"g००gle", "name", "mixes Latin letters and Devanagari digits", "०"}}},
		{"a_bengali_zero", "micr০soft.com", []found{{"micr০soft.com", "host", "mixes Latin letters and Bengali digits", "০"}}},
		{"an_arabic_indic_one", "paypa١.com", []found{{"paypa١.com", "host", "mixes Latin letters and Arabic-Indic digits", "١"}}},
		{"a_digit_with_no_latin_twin", "abc१", []found{{"abc१", "name", "mixes Latin letters and Devanagari digits", "१"}}},
		{"fullwidth_digits_in_a_host", "g００gle.com", []found{{"g００gle.com", "host", "mixes Latin letters and Fullwidth digits", "０"}}},
		{"fullwidth_digits_beside_ascii_ones", "ping １０.0.0.1", []found{{"１０.0.0.1", "host", "mixes ASCII and Fullwidth digits", "１０"}}},
		{"digits_of_other_scripts_in_their_own_text", "السعر ١٠٠ ريال ２０２４年 २०२४ में", nil},
		// Styled letters: mathematical, fullwidth, enclosed, letterlike.
		{"mathematical_bold_letters_in_a_host", "𝐩𝐚𝐲𝐩𝐚𝐥.com", []found{{"𝐩𝐚𝐲𝐩𝐚𝐥.com", "host", "mixes Latin letters and styled letters", "𝐩𝐚𝐲𝐥"}}},
		{"a_name_wholly_of_monospace_letters", "call 𝚐𝚘𝚘𝚐𝚕𝚎", []found{{"𝚐𝚘𝚘𝚐𝚕𝚎", "name", "is written in styled letters that pass for Latin", "𝚐𝚘𝚕𝚎"}}},
		{"fullwidth_letters", "ｐａｙｐａｌ", []found{{"ｐａｙｐａｌ", "name", "is written in styled letters that pass for Latin", "ｐａｙｌ"}}},
		{"circled_letters", "ⓟⓐⓨⓟⓐⓛ.com", []found{{"ⓟⓐⓨⓟⓐⓛ.com", "host", "mixes Latin letters and styled letters", "ⓟⓐⓨⓛ"}}},
		{"superscript_and_parenthesized_letters_in_hosts", "ᵖaypal.com me@ᵖaypal.com /usr/bin/ᵖython ⒜pple.com 🄟aypal.com", []found{
			{"ᵖaypal.com", "host", "mixes Latin letters and styled letters", "ᵖ"},
			{"me@ᵖaypal.com", "e-mail address", "mixes Latin letters and styled letters", "ᵖ"},
			{"/usr/bin/ᵖython", "path", "mixes Latin letters and styled letters", "ᵖ"},
			{"⒜pple.com", "host", "mixes Latin letters and styled letters", "⒜"},
			{"🄟aypal.com", "host", "mixes Latin letters and styled letters", "🄟"},
		}},
		{"a_parenthesized_letter_in_a_word", "⒜pple", []found{{"⒜pple", "name", "mixes Latin letters and styled letters", "⒜"}}},
		{"superscript_and_subscript_letters_in_prose", "Mᵐᵉ Dupont, xⁿ + yⁿ, le 1ᵉʳ mai, the 2ⁿᵈ, Hᵢ", nil},
		{"a_script_small_l", "ℓogin", []found{{"ℓogin", "name", "mixes Latin letters and styled letters", "ℓ"}}},
		{"a_roman_numeral_fifty", "paypaⅼ.com", []found{{"paypaⅼ.com", "host", "mixes Latin letters and styled letters", "ⅼ"}}},
		{"a_styled_greek_alpha", "𝛂pple", []found{{"𝛂pple", "name", "mixes Latin letters and styled letters", "𝛂"}}},
		{"styled_letters_as_typography_or_mathematics", "ＰＤＦファイルを開く Ｔシャツ 第Ⅱ章 𝑥 + 𝑦 = 2ℓ", nil},
		// A μ or Ω after digits is a unit only when a unit's letters follow.
		{"a_mu_after_digits_that_is_no_unit", "10μicrosoft", []found{{"10μicrosoft", "name", "mixes Latin and Greek letters", "μ"}}},
		{"an_omega_after_digits_that_is_no_unit", "3Ωpen", []found{{"3Ωpen", "name", "mixes Latin and Greek letters", "Ω"}}},
		{"a_micro_sign_that_is_no_unit", "10\u00b5icrosoft", []found{{"10\u00b5icrosoft", "name", "mixes Latin and Greek letters", "\u00b5"}}},
		{"units_after_a_number_and_a_space", "a film 10 μm thick, 4.7 kΩ, 100 MΩ", nil},
		// Letters the tables lacked (R8), and marks drawn as a full stop.
		{"a_dental_click_in_a_host", "paypa\u01c0.com", []found{{"paypa\u01c0.com", "host", "mixes Latin and phonetic Latin letters", "\u01c0"}}},
		{"a_straight_u_in_a_wholly_cyrillic_label", "\u04af\u0430\u04bb\u043e\u043e.com", []found{{"\u04af\u0430\u04bb\u043e\u043e.com", "host", "mixes Latin and Cyrillic letters", "\u04af\u0430\u04bb\u043e"}}},
		{"greek_gamma_and_omicron", "\u03b3\u03bf\u03bf.com", []found{{"\u03b3\u03bf\u03bf.com", "host", "mixes Latin and Greek letters", "\u03b3\u03bf"}}},
		{"lisu_letters", "\ua4da\ua4f2\ua4e2\ua4da\ua4f3.com", []found{{"\ua4da\ua4f2\ua4e2\ua4da\ua4f3.com", "host", "mixes Latin and Lisu letters", "\ua4da\ua4f2\ua4e2\ua4f3"}}},
		{"coptic_letters", "\u2ca3\u2c9f\u2ca3.com", []found{{"\u2ca3\u2c9f\u2ca3.com", "host", "mixes Latin and Coptic letters", "\u2ca3\u2c9f"}}},
		{"cherokee_small_letters", "\uab70\uab7a\uabaf.com", []found{{"\uab70\uab7a\uabaf.com", "host", "mixes Latin and Cherokee letters", "\uab70\uab7a\uabaf"}}},
		{"a_small_full_stop_joins_a_spoofed_label", "\u0430\u0440\u0440\u04cf\u0435\ufe52com", []found{{"\u0430\u0440\u0440\u04cf\u0435\ufe52com", "host", "mixes Latin and Cyrillic letters", "\u0430\u0440\u04cf\u0435"}}},
		{"a_middle_dot_joins_a_spoofed_label", "\u0430\u0440\u0440\u04cf\u0435\u00b7com", []found{{"\u0430\u0440\u0440\u04cf\u0435\u00b7com", "host", "mixes Latin and Cyrillic letters", "\u0430\u0440\u04cf\u0435"}}},
		{"greek_prose_and_a_catalan_middle_dot", "\u03ba\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1, \u03ce\u03c1\u03b1 \u03b3\u03b9\u03b1 \u03c6\u03b1\u03b3\u03b7\u03c4\u03cc; el col\u00b7legi", nil},
		// Japanese text (R8): an ideographic full stop ends a sentence beside
		// Japanese letters, and fullwidth capitals standing alone are its
		// typography; beside a Latin label it is still a host's dot.
		{"japanese_sentences_and_acronyms", "会議は１０月１日です。ＰＣとＵＳＢを持参。ＯＫ", nil},
		{"fullwidth_digits_after_a_latin_word_or_beside_japanese", "Windows１１ 対応、iPhone１５ と 第１回meeting", nil},
		{"fullwidth_digits_in_a_host_path_or_identifier_or_before_a_letter", "Windows１１.exe /opt/app１ deploy_v２ g００gle Windows1１", []found{
			{"Windows１１.exe", "host", "mixes Latin letters and Fullwidth digits", "１"},
			{"/opt/app１", "path", "mixes Latin letters and Fullwidth digits", "１"},
			{"deploy_v２", "name", "mixes Latin letters and Fullwidth digits", "２"},
			{"g００gle", "name", "mixes Latin letters and Fullwidth digits", "０"},
			{"Windows1１", "name", "mixes Latin letters and Fullwidth digits", "１"},
		}},
		{"an_ideographic_full_stop_between_latin_labels_is_a_dot", "\u0430\u0440\u0440\u04cf\u0435\u3002com", []found{{"\u0430\u0440\u0440\u04cf\u0435\u3002com", "host", "mixes Latin and Cyrillic letters", "\u0430\u0440\u04cf\u0435"}}},
		// Wholly look-alike words of two scripts, or shaped as a path, an
		// option or an address (R8).
		{"cyrillic_and_armenian_in_one_word", "run \u0455\u057d\u0501\u043e now", []found{{"\u0455\u057d\u0501\u043e", "name", "is written in Cyrillic and Armenian letters that pass for Latin", "\u0455\u057d\u0501\u043e"}}},
		{"a_wholly_look_alike_path", "\u002f\u0501\u0435\u03bd\u002f\u0455\u0501\u0430", []found{{"/\u0501\u0435\u03bd/\u0455\u0501\u0430", "path", "is written in Cyrillic and Greek letters that pass for Latin", "\u0501\u0435\u03bd\u0455\u0430"}}},
		{"a_wholly_look_alike_option", "\u0455\u04bb\u0435\u04cf\u04cf-\u0435\u0445\u0435\u0441", []found{{"\u0455\u04bb\u0435\u04cf\u04cf-\u0435\u0445\u0435\u0441", "name", "is written in Cyrillic letters that pass for Latin", "\u0455\u04bb\u0435\u04cf\u0445\u0441"}}},
		{"russian_hyphenated_words_and_slashes", "кто-то по-русски, р/с, сор", nil},
		// A combining mark that forms no letter with the Latin one before it.
		{"a_dotless_i_with_a_combining_dot", "l\u0131\u0307nkedin.com", []found{{"l\u0131\u0307nkedin.com", "host", "mixes Latin letters and combining marks", "\u0307"}}},
		{"a_decomposed_acute_composes", "caf\u0065\u0301 na\u0131ve", nil},
		// Punctuation drawn as a path's, an address's or a host's (R8).
		{"a_division_slash_in_an_address", "open https://paypal.com\u2215login.evil.com/x", []found{{"https://paypal.com\u2215login.evil.com/x", "address", "mixes Latin letters and punctuation that is not ASCII", "\u2215"}}},
		{"a_fraction_slash_in_a_host", "paypal.com\u2044login.evil.com", []found{{"paypal.com\u2044login.evil.com", "host", "mixes Latin letters and punctuation that is not ASCII", "\u2044"}}},
		{"a_fullwidth_at_in_an_address", "mail admin\uff20paypal.com", []found{{"admin\uff20paypal.com", "host", "mixes Latin letters and punctuation that is not ASCII", "\uff20"}}},
		{"fractions_and_cjk_typography_are_no_spoof", "add 1\u20442 cup; ファイル\uff0fフォルダ; Mac\uff0fWindows版", nil},
		{"units_joined_to_their_number", "10μF 5μs 10μm 4.7kΩ 2.2μH 2ℓ/100km", nil},
		{"a_unit_with_more_than_two_letters_after_it", "10μmol", []found{{"10μmol", "name", "mixes Latin and Greek letters", "μ"}}},
		{"units_after_a_number_are_not_spoofs", "a 4.7kΩ resistor and 10μm film", nil},
		{"a_turkish_dotless_i_is_an_ordinary_letter", "kapı açık", nil},
		// ASCII names that read as leading to a domain they do not (R8 F8).
		{"an_address_with_a_domain_before_its_at", "open https://paypal.com@evil.example/login now", []found{{"https://paypal.com@evil.example/login", "address", "leads to the host evil.example: paypal.com before the @ is a user name", ""}}},
		{"a_password_and_a_port_are_no_part_of_it", "https://paypal.com:x@evil.example:8443/", []found{{"https://paypal.com:x@evil.example:8443/", "address", "leads to the host evil.example: paypal.com before the @ is a user name", ""}}},
		{"user_names_that_read_as_no_domain", "https://me@example.com/ https://oauth2:token@gitlab.com/x.git git@github.com:a/b https://jane.doe@gitlab.com/x", nil},
		{"a_domain_in_front_of_an_addresss_domain", "https://accounts.google.com.evil.example/", []found{{"https://accounts.google.com.evil.example/", "address", "leads to the domain evil.example, not google.com", ""}}},
		{"a_domain_cut_by_a_hyphen", "paypal.com-login.evil.net", []found{{"paypal.com-login.evil.net", "host", "leads to the domain evil.net, not paypal.com", ""}}},
		{"a_country_domain_in_an_e_mail_address", "me@paypal.co.uk.evil.example", []found{{"me@paypal.co.uk.evil.example", "e-mail address", "leads to the domain evil.example, not paypal.co.uk", ""}}},
		{"an_address_without_its_scheme", "accounts.google.com.evil.net/login", []found{{"accounts.google.com.evil.net/login", "path", "leads to the domain evil.net, not google.com", ""}}},
		{"a_domain_under_a_hosting_suffix_names_its_tenant", "PayPal.com.github.io evil.paypal.com.netlify.app", []found{{"PayPal.com.github.io", "host", "leads to the domain com.github.io, not paypal.com", ""}, {"evil.paypal.com.netlify.app", "host", "leads to the domain com.netlify.app, not paypal.com", ""}}},
		{"hosts_with_no_domain_in_front_of_theirs", "www.example.com.au foo.co.uk s3.amazonaws.com bucket.s3.amazonaws.com a.b.example.com mail.google.com www.net-a-porter.com 10.0.0.1 127.0.0.1:8080 localhost https://localhost:3000/ https://[::1]:80/x", nil},
		{"regions_and_environments_in_front_of_a_domain", "tenant.us.auth0.com ingest.de.sentry.io api.dev.example.com ec2.eu-west-1.amazonaws.com", nil},
		{"file_names_under_no_top_level_domain", "example.com.conf www.example.com.conf.bak paypal.com.evil.example notes.txt archive.tar.gz v1.2.3 docs.python.org/3/library github.com/foo/bar", nil},
		// User-info spoofs clients follow, whatever punctuation surrounds
		// the domain before the last @ (R10 F1).
		{"punctuation_in_the_user_info", "https://paypal.com&login@evil.ru/ https://paypal.com;x@evil.ru/a https://paypal.com!@evil.ru https://paypal.com,x@evil.ru/ https://paypal.com=x@evil.ru/ https://paypal.com%2F@evil.ru/", []found{
			{"https://paypal.com&login@evil.ru/", "address", "leads to the host evil.ru: paypal.com before the @ is a user name", ""},
			{"https://paypal.com;x@evil.ru/a", "address", "leads to the host evil.ru: paypal.com before the @ is a user name", ""},
			{"https://paypal.com!@evil.ru", "address", "leads to the host evil.ru: paypal.com before the @ is a user name", ""},
			{"https://paypal.com,x@evil.ru/", "address", "leads to the host evil.ru: paypal.com before the @ is a user name", ""},
			{"https://paypal.com=x@evil.ru/", "address", "leads to the host evil.ru: paypal.com before the @ is a user name", ""},
			{"https://paypal.com%2F@evil.ru/", "address", "leads to the host evil.ru: paypal.com before the @ is a user name", ""},
		}},
		{"a_trailing_dot_or_a_second_at_in_the_user_info", "https://paypal.com.@evil.ru/ https://paypal.com@@evil.ru", []found{
			{"https://paypal.com.@evil.ru/", "address", "leads to the host evil.ru: paypal.com before the @ is a user name", ""},
			{"https://paypal.com@@evil.ru", "address", "leads to the host evil.ru: paypal.com before the @ is a user name", ""},
		}},
		{"an_ipv6_host_after_the_at", "open https://paypal.com@[2001:db8::1]/login", []found{{"https://paypal.com@[2001:db8::1]/login", "address", "leads to the host [2001:db8::1]: paypal.com before the @ is a user name", ""}}},
		{"a_backslash_before_the_at", `https://paypal.com\@evil.ru/`, []found{{`https://paypal.com\@evil.ru/`, "address", "leads to the host evil.ru: paypal.com before the @ is a user name", ""}}},
		{"an_address_without_its_scheme_with_a_user", "curl paypal.com@evil.ru/login", []found{{"paypal.com@evil.ru/login", "path", "leads to the host evil.ru: paypal.com before the @ is a user name", ""}}},
		{"a_trailing_dot_on_the_host_is_no_part_of_its_name", "https://paypal.com@evil.ru./x", []found{{"https://paypal.com@evil.ru./x", "address", "leads to the host evil.ru: paypal.com before the @ is a user name", ""}}},
		{"addresses_and_users_that_are_no_spoof", "git@github.com:org/repo.git ssh user@localhost bob@example.com wrote support.team@example.com https://a.com, b@c.com https://user:pa$$@example.com/x", nil},
		// Domains in front shapes the subdomain rule missed (R10 F3).
		{"a_hyphen_joins_a_domain_to_the_registered_label", "paypal.com-login.ru", []found{{"paypal.com-login.ru", "host", "leads to the domain com-login.ru, not paypal.com", ""}}},
		{"a_country_code_domain_in_front", "https://ghcr.io.evil.com/v2/", []found{{"https://ghcr.io.evil.com/v2/", "address", "leads to the domain evil.com, not ghcr.io", ""}}},
		{"environments_and_services_in_front_of_a_domain", "api.staging.app.example.com x.tenant.us.auth0.com web.api.dev.example.com", nil},
		{"an_encoded_dot", "paypal.com%2eevil.ru https://paypal.com%2Eevil.ru/", []found{
			{"paypal.com%2eevil.ru", "host", "leads to the domain evil.ru, not paypal.com", ""},
			{"https://paypal.com%2Eevil.ru/", "address", "leads to the domain evil.ru, not paypal.com", ""},
		}},
		{"a_trailing_dot_names_the_domain_without_it", "https://accounts.google.com.evil.ru./", []found{{"https://accounts.google.com.evil.ru./", "address", "leads to the domain evil.ru, not google.com", ""}}},
		{"package_cluster_and_cloud_names_are_no_spoof", "github.com/x/y go.dev/doc my-svc.my-ns.svc.cluster.local mybucket.s3.us-east-1.amazonaws.com s3.dualstack.eu-west-1.amazonaws.com mybucket.storage.googleapis.com acct.blob.core.windows.net www.net-a-porter.com v1.2.3 1.2.3.4 cdn.jsdelivr.net/npm/x@1.2.3/dist", nil},
		{"pure_latin", "rm -rf /tmp/build && curl https://paypal.com/ café naïve", nil},
		{"a_cyrillic_sentence", "Привет, мир! Удалить файл отчёт.pdf?", nil},
		{"a_cyrillic_host", "пример.рф", nil},
		{"a_cyrillic_label_that_does_not_pass_for_latin", "пример.com", nil},
		{"a_greek_sentence", "Καλημέρα κόσμε", nil},
		{"cjk_and_latin", "東京 Tokyo Tシャツ 東京tower", nil},
		{"digits_and_punctuation", "123-456 (789) 3.14 #!/bin/sh", nil},
		{"a_cyrillic_word_beside_latin_words", "сор is Russian for nothing", nil},
		{"empty", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []found
			for _, l := range lookalike.Find(tt.in) {
				says := strings.TrimPrefix(l.Summary(func(s string) string { return s }), "the "+l.Kind+" "+l.Text+" ")
				got = append(got, found{l.Text, l.Kind, says, string(l.Characters)})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("LookAlikes(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestLookAlikeWarningSaysWhichLetterPassesForWhich(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"a_division_slash", "https://paypal.com\u2215login", "the address [https://paypal.com\u2215login] mixes Latin letters and punctuation that is not ASCII: [\u2215] (U+2215 DIVISION SLASH) looks like /; in ASCII its host is [paypal.xn--comlogin-0f7d]"},
		{"one_letter", "pаypal.com", "the host [pаypal.com] mixes Latin and Cyrillic letters: [а] (U+0430 CYRILLIC SMALL LETTER A) looks like a; in ASCII its host is [xn--pypal-4ve.com]"},
		{"a_host_wholly_look_alike", "аррӏе.со", "the host [аррӏе.со] is written in Cyrillic letters that pass for Latin: [а] (U+0430 CYRILLIC SMALL LETTER A) looks like a; [р] (U+0440 CYRILLIC SMALL LETTER ER) looks like p; [ӏ] (U+04CF CYRILLIC SMALL LETTER PALOCHKA) looks like l; and 3 more; in ASCII its host is [xn--80ak6aa92e.xn--n1af]"},
		{"an_address_shows_its_hosts_ascii_form", "https://me@gіthub.com:443/x", "the address [https://me@gіthub.com:443/x] mixes Latin and Cyrillic letters: [і] (U+0456 CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I) looks like i; in ASCII its host is [xn--gthub-n2e.com]"},
		{"an_e_mail_address_shows_its_hosts_ascii_form", "me@gіthub.com", "the e-mail address [me@gіthub.com] mixes Latin and Cyrillic letters: [і] (U+0456 CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I) looks like i; in ASCII its host is [xn--gthub-n2e.com]"},
		{"a_styled_host_shows_the_host_it_resolves_to", "ｇｏ．com", "the host [ｇｏ．com] mixes Latin letters and styled letters: [ｇ] (U+FF47 FULLWIDTH LATIN SMALL LETTER G), a styled letter, passes for g; [ｏ] (U+FF4F FULLWIDTH LATIN SMALL LETTER O), a styled letter, passes for o; in ASCII its host is [go.com]"},
		{"an_address_with_a_domain_before_its_at", "https://paypal.com@evil.example/login", "the address [https://paypal.com@evil.example/login] leads to the host [evil.example]: [paypal.com] before the @ is a user name"},
		{"a_look_alike_address_with_a_domain_before_its_at", "https://pаypal.com@evil.example/login", "the address [https://pаypal.com@evil.example/login] mixes Latin and Cyrillic letters: [а] (U+0430 CYRILLIC SMALL LETTER A) looks like a; it leads to the host [evil.example]: [pаypal.com] before the @ is a user name"},
		{"both_a_domain_before_its_at_and_in_its_host", "https://paypal.com@paypal.com.evil.example/", "the address [https://paypal.com@paypal.com.evil.example/] leads to the host [paypal.com.evil.example]: [paypal.com] before the @ is a user name; it leads to the domain [evil.example], not [paypal.com]"},
		{"a_path_has_no_host", "/etc/раsswd", "the path [/etc/раsswd] mixes Latin and Cyrillic letters: [р] (U+0440 CYRILLIC SMALL LETTER ER) looks like p; [а] (U+0430 CYRILLIC SMALL LETTER A) looks like a"},
		{"a_digit_that_looks_like_a_letter", "g൦൦gle", "the name [g൦൦gle] mixes Latin letters and Malayalam digits: [൦] (U+0D66 MALAYALAM DIGIT ZERO) looks like o"},
		{"a_digit_with_no_latin_twin", "abc१", "the name [abc१] mixes Latin letters and Devanagari digits: [१] (U+0967 DEVANAGARI DIGIT ONE), a digit 1"},
		{"a_styled_letter", "𝐩ay", "the name [𝐩ay] mixes Latin letters and styled letters: [𝐩] (U+1D429 MATHEMATICAL BOLD SMALL P), a styled letter, passes for p"},
		{"a_fraktur_letter", "𝔄pple", "the name [𝔄pple] mixes Latin letters and styled letters: [𝔄] (U+1D504 MATHEMATICAL FRAKTUR CAPITAL A), a styled letter, passes for A"},
		{"a_styled_greek_letter", "x𝝀", "the name [x𝝀] mixes Latin letters and styled letters: [𝝀] (U+1D740 MATHEMATICAL BOLD ITALIC SMALL LAMDA), a styled letter, passes for λ"},
		{"a_negative_squared_letter", "🅰pple", "the name [🅰pple] mixes Latin letters and styled letters: [🅰] (U+1F170 NEGATIVE SQUARED LATIN CAPITAL LETTER A), a styled letter, passes for A"},
		{"a_superscript_letter_in_a_host", "ᵖaypal.com", "the host [ᵖaypal.com] mixes Latin letters and styled letters: [ᵖ] (U+1D56 MODIFIER LETTER SMALL P), a styled letter, passes for p; in ASCII its host is [paypal.com]"},
		{"a_parenthesized_letter", "⒜pple.com", "the host [⒜pple.com] mixes Latin letters and styled letters: [⒜] (U+249C PARENTHESIZED LATIN SMALL LETTER A), a styled letter, passes for a; in ASCII its host is [xn--pple-uz1b.com]"},
		{"a_kelvin_sign", "\u212Aey", "the name [\u212Aey] mixes Latin letters and styled letters: [\u212A] (U+212A KELVIN SIGN), a styled letter, passes for K"},
		{"an_omega_that_is_no_unit", "3Ωpen", "the name [3Ωpen] mixes Latin and Greek letters: [Ω] (U+03A9 GREEK CAPITAL LETTER OMEGA), a Greek letter, is no unit here"},
		{"a_letter_with_no_latin_twin", "bжd", "the name [bжd] mixes Latin and Cyrillic letters: [ж] (U+0436, a Cyrillic letter)"},
		{"past_three_letters", "xаеорс", "the name [xаеорс] mixes Latin and Cyrillic letters: [а] (U+0430 CYRILLIC SMALL LETTER A) looks like a; [е] (U+0435 CYRILLIC SMALL LETTER IE) looks like e; [о] (U+043E CYRILLIC SMALL LETTER O) looks like o; and 2 more"},
		{"three_scripts", "gօᏀgle", "the name [gօᏀgle] mixes Latin, Armenian and Cherokee letters: [օ] (U+0585 ARMENIAN SMALL LETTER OH) looks like o; [Ꮐ] (U+13C0 CHEROKEE LETTER NAH) looks like G"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ls := lookalike.Find(tt.in)
			if len(ls) != 1 {
				t.Fatalf("LookAlikes(%q) = %+v, want one", tt.in, ls)
			}
			if got := ls[0].Warning(func(s string) string { return "[" + s + "]" }); got != tt.want {
				t.Fatalf("Warning = %q, want %q", got, tt.want)
			}
		})
	}
}

// A host longer than a DNS name may be is still flagged but given no
// ASCII form: punycode's encoding costs a label's length times its
// distinct characters, and an agent's hosts of 20,700 distinct Han
// characters (R8) took 21 s of CPU in one LookAlikes on every reviewer
// surface.
func TestAHostLongerThanADNSNameHasNoASCIIForm(t *testing.T) {
	han := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteRune(rune(0x4E00 + i))
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, host string
		ascii      bool
	}{
		{"a label of 63 characters", "pа" + han(61) + ".com", true},
		{"a label of 64 characters", "pа" + han(62) + ".com", false},
		{"a name of 253 characters", "pа" + strings.Repeat(han(50)+".", 4) + "com" + strings.Repeat("x", 253-2-4*51-3), true},
		{"a name of 254 characters", "pа" + strings.Repeat(han(50)+".", 4) + "com" + strings.Repeat("x", 254-2-4*51-3), false},
		{"the hostile shape", "pа1" + han(20700) + ".com", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found := lookalike.Find("see " + tc.host)
			if len(found) != 1 || found[0].Text != tc.host {
				t.Fatalf("found %d names, want the host flagged", len(found))
			}
			if got := found[0].ASCII != ""; got != tc.ascii {
				t.Errorf("ASCII form %.40q…: given %v, want %v", found[0].ASCII, got, tc.ascii)
			}
		})
	}
}

// BenchmarkLookAlikesHostile is R8's request: four hosts of 20,700
// distinct Han characters each after a Cyrillic а, 248 KB.
func BenchmarkLookAlikesHostile(b *testing.B) {
	var hosts []string
	for h := range 4 {
		var s strings.Builder
		s.WriteString("pа" + string(rune('0'+h)))
		for i := range 20700 {
			s.WriteRune(rune(0x4E00 + i))
		}
		hosts = append(hosts, s.String()+".com")
	}
	in := `{"path":"notes.txt","h":["` + strings.Join(hosts, `","`) + `"]}`
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		lookalike.Find(in)
	}
}

// BenchmarkLookAlikesDistinctASCIIHosts is R10 F5's shape: ~250 KB of
// distinct dotted ASCII names, each a host the ASCII rules must judge
// (labels in front of a registrable domain, an address with a user).
func BenchmarkLookAlikesDistinctASCIIHosts(b *testing.B) {
	var s strings.Builder
	for i := 0; s.Len() < 250_000; i++ {
		fmt.Fprintf(&s, "api%d.svc%d.example%d.com https://u%d.co@h%d.example.org/x ", i, i, i, i, i)
	}
	in := s.String()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		lookalike.Find(in)
	}
}

// BenchmarkLookAlikesManyCutASCIIHosts: ~250 KB of distinct hosts as long
// as a DNS name may be, each label a cut the domain-in-front rule judges.
func BenchmarkLookAlikesManyCutASCIIHosts(b *testing.B) {
	var s strings.Builder
	for i := 0; s.Len() < 250_000; i++ {
		host := fmt.Sprintf("h%d", i)
		for len(host) < 240 {
			host += ".com-a"
		}
		s.WriteString(host + ".evil.com https://" + host[:200] + "@x.com/ ")
	}
	in := s.String()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		lookalike.Find(in)
	}
}

// BenchmarkLookAlikesRepeatedASCIIHost: one unflagged host as long as a
// DNS name may be, of many cuts, repeated to ~250 KB: judged once.
func BenchmarkLookAlikesRepeatedASCIIHost(b *testing.B) {
	host := "h"
	for len(host) < 240 {
		host += ".com-a"
	}
	in := strings.Repeat(host+".example.com ", 250_000/(len(host)+13))
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		lookalike.Find(in)
	}
}
