/* Text of names in reports: the lossless bytes <-> UTF-8 mapping of the JSON profile,
 * readable UTF-8 for display formats, and the parts of a frame name. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nupp/profile.h"
#include "report_internal.h"

/* -- UTF-8 ---------------------------------------------------------------------- */

/* First and last code points of the private-use range that stands for raw bytes. */
#define RTEXT_RAW_LO 0xEF80u
#define RTEXT_RAW_HI 0xEFFFu

/* Length of the well-formed UTF-8 sequence at s (1..4, RFC 3629: no overlong form, no
 * surrogate, at most U+10FFFF), its code point in *cp; 0 if s does not start one. */
static int rtext_utf8_seq(const unsigned char *s, unsigned *cp)
{
	unsigned c = s[0];

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xC2 && c <= 0xDF && (s[1] & 0xC0) == 0x80) {
		*cp = (c & 0x1F) << 6 | (s[1] & 0x3F);
		return 2;
	}
	if (c >= 0xE0 && c <= 0xEF && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80) {
		*cp = (c & 0x0F) << 12 | (s[1] & 0x3F) << 6 | (s[2] & 0x3F);
		if (*cp < 0x800 || (*cp >= 0xD800 && *cp <= 0xDFFF))
			return 0;
		return 3;
	}
	if (c >= 0xF0 && c <= 0xF4 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 && (s[3] & 0xC0) == 0x80) {
		*cp = (c & 0x07) << 18 | (s[1] & 0x3F) << 12 | (s[2] & 0x3F) << 6 | (s[3] & 0x3F);
		if (*cp < 0x10000 || *cp > 0x10FFFF)
			return 0;
		return 4;
	}
	return 0;
}

/* True if s is well-formed UTF-8 with no character of the raw-byte range. */
bool nupp_rtext_plain(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned cp;
	int n;

	while (*p) {
		if (*p < 0x80) {
			p++;
			continue;
		}
		n = rtext_utf8_seq(p, &cp);
		if (!n || (cp >= RTEXT_RAW_LO && cp <= RTEXT_RAW_HI))
			return false;
		p += n;
	}
	return true;
}

/* Maps a name to its lossless UTF-8 form (U+EF00 + byte for each byte not in a
 * well-formed sequence, or in a sequence of a character of that range). */
char *nupp_bytes_to_utf8(const char *bytes)
{
	const unsigned char *p = (const unsigned char *)bytes;
	size_t len = strlen(bytes);
	char *out = malloc(len * 3 + 1), *o = out;
	unsigned cp;
	int n, i;

	if (!out)
		return NULL;
	while (*p) {
		n = *p < 0x80 ? 1 : rtext_utf8_seq(p, &cp);
		if (n && !(n == 3 && cp >= RTEXT_RAW_LO && cp <= RTEXT_RAW_HI)) {
			memcpy(o, p, n);
			o += n;
			p += n;
			continue;
		}
		for (i = 0; i < (n ? n : 1); i++) {
			cp = 0xEF00u + p[i];
			*o++ = (char)(0xE0 | cp >> 12);
			*o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
			*o++ = (char)(0x80 | (cp & 0x3F));
		}
		p += n ? n : 1;
	}
	*o = 0;
	return out;
}

/* Maps the lossless UTF-8 form back to the bytes it stands for. */
char *nupp_utf8_to_bytes(const char *utf8, size_t *len)
{
	const unsigned char *p = (const unsigned char *)utf8;
	char *out = malloc(strlen(utf8) + 1), *o = out;
	unsigned cp;
	int n;

	if (!out)
		return NULL;
	while (*p) {
		n = *p < 0x80 ? 1 : rtext_utf8_seq(p, &cp);
		if (n == 3 && cp >= RTEXT_RAW_LO && cp <= RTEXT_RAW_HI) {
			*o++ = (char)(cp - 0xEF00u);
			p += 3;
			continue;
		}
		n = n ? n : 1; /* not UTF-8 (the caller checked it is): copied as it is */
		memcpy(o, p, n);
		o += n;
		p += n;
	}
	*o = 0;
	if (len)
		*len = (size_t)(o - out);
	return out;
}

/* Appends s[0..len) to b as well-formed UTF-8 for display: each control character and
 * each byte that is not part of a well-formed sequence as "\xHH". s must be
 * NUL-terminated at or after len. */
int nupp_rtext_display(struct nupp_buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	unsigned cp;
	int n;

	while (p < end) {
		if (*p >= 0x20 && *p < 0x7F) {
			nupp_buf_addc(b, (char)*p++);
			continue;
		}
		/* s is NUL-terminated at or after end, so the sequence read stops there; one
		 * cut by end is not well-formed here and its bytes are shown as \x. */
		n = *p >= 0x80 ? rtext_utf8_seq(p, &cp) : 0;
		if (n && p + n <= end) {
			nupp_buf_add(b, (const char *)p, (size_t)n);
			p += n;
			continue;
		}
		nupp_buf_add(b, "\\x", 2);
		nupp_buf_addc(b, hex[*p >> 4]);
		nupp_buf_addc(b, hex[*p & 15]);
		p++;
	}
	return b->err;
}

/* A new display string of s (see nupp_rtext_display), or NULL on ENOMEM. */
char *nupp_rtext_display_dup(const char *s)
{
	struct nupp_buf b = { 0 };

	if (nupp_rtext_display(&b, s, strlen(s)) || nupp_buf_addc(&b, 0)) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* -- Growing buffers ------------------------------------------------------------ */

/* Makes room for n more bytes; 0 or -ENOMEM (sticky in b->err). */
static int buf_reserve(struct nupp_buf *b, size_t n)
{
	char *np;
	size_t cap;

	if (b->err)
		return b->err;
	if (b->len + n <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + n)
		cap *= 2;
	np = realloc(b->p, cap);
	if (!np)
		return b->err = -ENOMEM;
	b->p = np;
	b->cap = cap;
	return 0;
}

/* Appends n bytes. */
int nupp_buf_add(struct nupp_buf *b, const char *s, size_t n)
{
	if (buf_reserve(b, n))
		return b->err;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	return 0;
}

/* Appends one byte. */
int nupp_buf_addc(struct nupp_buf *b, char c)
{
	return nupp_buf_add(b, &c, 1);
}

/* -- Frame names ---------------------------------------------------------------- */

/* Splits a frame name as nupp-bpf writes it ("module:name", "module:123", a builtin
 * "pcall", a C symbol, "[host]") into its module (file) and what follows. A Lua frame
 * has a ':' that is not part of a "::" and not inside a leading "[...]"; its module
 * is everything before the last such ':'. Returns false for frames with no module. */
bool nupp_rtext_frame_split(const char *frame, size_t len, size_t *module_len)
{
	size_t i, start = 0;

	if (len && frame[0] == '[') {
		const char *close = memchr(frame, ']', len);

		if (!close)
			return false;
		start = (size_t)(close - frame) + 1;
		if (start >= len || frame[start] != ':')
			return false; /* "[host]", "[builtin:x]", "[coroutine]" */
	}
	for (i = len; i-- > start;) {
		if (frame[i] != ':')
			continue;
		if (i + 1 == len || i == 0 || frame[i - 1] == ':' || frame[i + 1] == ':')
			return false; /* "a::b" is a C++ symbol, not module:name */
		*module_len = i;
		return true;
	}
	return false;
}

/* The line number a frame name ends in ("m.lua:123"), or 0. */
int nupp_rtext_frame_line(const char *frame, size_t len)
{
	size_t ml, i;
	long v = 0;

	if (!nupp_rtext_frame_split(frame, len, &ml) || ml + 1 >= len)
		return 0;
	for (i = ml + 1; i < len; i++) {
		if (frame[i] < '0' || frame[i] > '9' || v > 100000000)
			return 0;
		v = v * 10 + (frame[i] - '0');
	}
	return (int)v;
}
